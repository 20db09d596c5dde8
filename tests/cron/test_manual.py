"""Occurrences on demand (``cron/manual.py``): trigger a job now, once per key, and backfill a
past range, each occurrence under the key the service uses, so nothing runs twice. Through the
SDK over HTTP and in process, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest

from tests.cron.helpers import GREETING, CronRig, keys_of
from tests.factories import T0, definition, stored
from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.client.client import AsyncClient
from tickwheel.client.cron import Triggered
from tickwheel.client.transports.http import HttpTransport
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.config import Settings
from tickwheel.cron.jobs import CronJobs
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.errors import InvalidInput
from tickwheel.domain.models import Scope
from tickwheel.store.factory import cron_store_for
from tickwheel.store.protocol import Store

BASE = "http://testserver"
MINUTE = 60.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture(params=["http", "inprocess"])
async def client(
    request: pytest.FixtureRequest, store: Store, clock: FakeClock
) -> AsyncIterator[AsyncClient]:
    await store.definition_insert(stored(definition()))
    if request.param == "http":
        app = httpx.ASGITransport(app=create_app(store, Settings(_env_file=None), clock))  # type: ignore[call-arg]
        _, key = await create_key(store, "acme", Scope.SUBMIT, "sdk", clock.now())
        http = httpx.AsyncClient(transport=app, base_url=BASE)
        async with AsyncClient(transport=HttpTransport(BASE, key, http=http, backoff=0)) as c:
            yield c
    else:
        jobs = CronJobs(cron_store_for(store), store, "acme", "sdk test", clock)
        inprocess = InProcessTransport(store, "acme", clock)
        async with AsyncClient(transport=inprocess, clock=clock, cron_transport=jobs) as c:
            yield c


async def test_trigger_runs_the_job_now_once_per_key(client: AsyncClient, clock: FakeClock) -> None:
    job = await client.cron.create("nightly", "greet", "0 2 * * *", inputs={"name": "Ada"})
    first = await client.cron.trigger("nightly", key="deploy-42")
    clock.advance(1)  # a retry, a second later: the same run, the same history row
    again = await client.cron.trigger("nightly", key="deploy-42")
    assert isinstance(first, Triggered) and first.execution_id is not None
    assert again.execution_id == first.execution_id
    assert first.idempotency_key == f"cron-now:{job.cron_job_id}:deploy-42"
    other = await client.cron.trigger("nightly")  # a key of its own
    assert other.execution_id != first.execution_id
    executions = (await client.list(limit=50)).items
    assert len(executions) == 2
    assert sorted(e.execute_at for e in executions) == [T0, T0 + timedelta(seconds=1)]
    history = (await client.cron.history("nightly")).items
    assert len(history) == 2
    assert all("triggered by hand" in (r.reason or "") for r in history)
    assert (await client.cron.get("nightly")).next_run_at == job.next_run_at  # schedule as it was


async def test_backfill_validates_its_range(client: AsyncClient) -> None:
    await client.cron.create("every-second", "greet", "* * * * * *", inputs={"name": "Ada"})
    for start, end, path in [
        (T0 - timedelta(minutes=5), T0 + timedelta(minutes=1), "to"),  # the future
        (T0 - timedelta(days=8), T0 - timedelta(days=8), "from"),  # too old
        (T0 - timedelta(minutes=1), T0 - timedelta(minutes=2), "to"),  # backwards
        (T0 - timedelta(minutes=20), T0, "to"),  # 1,200 occurrences
    ]:
        with pytest.raises(InvalidInput) as bad:
            await client.cron.backfill("every-second", start, end)
        assert [e.path for e in bad.value.errors] == [path]
    assert (await client.list(limit=50)).items == []


@pytest.fixture
async def rig(store: Store) -> CronRig:
    rig = CronRig(store, T0)
    await rig.register()
    return rig


async def test_backfill_runs_what_did_not_run_and_nothing_twice(rig: CronRig) -> None:
    """The service down from 12:00 to 12:10: run_once coalesces 12:01-12:07 into 12:08; a
    backfill of 12:01-12:09 runs the seven coalesced ones and finds 12:08 and 12:09."""
    job = await rig.create(expression="* * * * *")
    rig.clock.advance(10 * MINUTE)
    await rig.tick()
    assert keys_of(await rig.executions(), job)[:2] == [
        "2026-03-01T12:08:00Z",
        "2026-03-01T12:09:00Z",
    ]
    start, end = T0 + timedelta(minutes=1), T0 + timedelta(minutes=9)
    result = await rig.jobs.cron_backfill(job["name"], start, end, rig.client)
    assert result["summary"] == {"created": 7, "existing": 2}
    assert [i["created"] for i in result["items"]] == [True] * 7 + [False] * 2
    again = await rig.jobs.cron_backfill(job["name"], start, end, rig.client)
    assert again["summary"] == {"created": 0, "existing": 9}
    for _ in range(3):
        await rig.advance(MINUTE)
    keys = keys_of(await rig.executions(), job)
    assert keys == sorted(set(keys))  # one execution per occurrence
    assert keys[:9] == [f"2026-03-01T12:{m:02}:00Z" for m in range(1, 10)]
    rows = {(r["occurrence"], r["outcome"]): r for r in await rig.history(job["name"])}
    assert "backfilled by hand" in rows[("2026-03-01T12:01:00Z", "SUBMITTED")]["reason"]
    assert ("2026-03-01T12:01:00Z", "COALESCED") in rows  # what the policy did stays recorded


async def test_a_workflow_job_is_triggered_and_backfilled_through_the_api(rig: CronRig) -> None:
    await rig.client.workflows.apply(GREETING, "yaml")  # its definition is registered already
    body = {"name": "wf", "workflow": {"name": "greeting"}, "inputs": {"who": "Ada"}}
    job, _ = await rig.jobs.cron_create({**body, "expression": "* * * * *"})
    triggered = await rig.jobs.cron_trigger("wf", "t1", rig.client)
    assert triggered["workflowRunId"] and triggered["executionId"] is None
    assert (await rig.jobs.cron_trigger("wf", "t1", rig.client)) == triggered
    rig.clock.advance(3 * MINUTE)  # 12:01 and 12:02 not started (no tick)
    result = await rig.jobs.cron_backfill(
        "wf", T0 + timedelta(minutes=1), T0 + timedelta(minutes=2), rig.client
    )
    assert result["summary"] == {"created": 2, "existing": 0}
    assert len(await rig.workflow_runs(job)) == 3
    with pytest.raises(InvalidInput):  # in process, without the workflow API
        await rig.jobs.cron_trigger("wf", "t2")
