"""``cron apply`` at scale (issue 18): more than a thousand jobs in one apply, prune per label so
several files coexist, and an apply that is safe to retry (its idempotency key returns the first
try's result), through the API, the SDK over HTTP, and in process."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.factories import T0, definition, stored
from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.app.cron_apply import STALE, CronApplyService, request_hash
from tickwheel.app.outcomes import Outcome
from tickwheel.client.client import AsyncClient
from tickwheel.client.cron_wire import spec_from_wire
from tickwheel.client.transports.http import HttpTransport
from tickwheel.config import Settings
from tickwheel.cron.jobs import CronJobs
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.errors import Conflict
from tickwheel.domain.models import Scope
from tickwheel.store.factory import cron_store_for
from tickwheel.store.protocol import Store

BASE = "http://testserver"


def declared(*names: str, expression: str = "0 2 * * *") -> list[dict[str, Any]]:
    return [
        {"name": n, "definitionUri": "greet", "expression": expression, "inputs": {"name": "Ada"}}
        for n in names
    ]


class TimesOutOnce(httpx.AsyncBaseTransport):
    """Lets the first apply reach the server and finish there, then loses its response the way
    a client timeout does; every other request passes."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.applies = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.url.path.endswith("/cron-jobs/apply"):
            self.applies += 1
            if self.applies == 1:
                raise httpx.ReadTimeout("timed out", request=request)
        return response


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
async def flaky(store: Store, clock: FakeClock) -> AsyncIterator[tuple[AsyncClient, TimesOutOnce]]:
    await store.definition_insert(stored(definition()))
    app = create_app(store, Settings(_env_file=None), clock)  # type: ignore[call-arg]
    wire = TimesOutOnce(httpx.ASGITransport(app=app))
    _, key = await create_key(store, "acme", Scope.SUBMIT, "sdk", clock.now())
    http = httpx.AsyncClient(transport=wire, base_url=BASE)
    async with AsyncClient(transport=HttpTransport(BASE, key, http=http, backoff=0)) as client:
        yield client, wire


@pytest.fixture
async def jobs(store: Store, clock: FakeClock) -> CronJobs:
    await store.definition_insert(stored(definition()))
    return CronJobs(cron_store_for(store), store, "acme", "apply test", clock)


async def test_a_retry_after_a_timeout_returns_the_first_result_and_applies_nothing(
    flaky: tuple[AsyncClient, TimesOutOnce], store: Store
) -> None:
    client, wire = flaky
    result = await client.cron.apply(declared("a", "b"))
    assert wire.applies == 2  # the first try applied, its answer was lost; the SDK retried
    # The retry shows what the first try did (two creates), not "2 unchanged".
    assert result.summary.model_dump() == {"create": 2, "update": 0, "delete": 0, "unchanged": 0}
    assert result.replayed is True
    cron = cron_store_for(store)
    for name in ("a", "b"):
        job = await cron.cron_job_get_by_name("acme", name)
        assert job is not None and job.version == 1
        assert len(await cron.cron_audit_list("acme", job.cron_job_id, 10)) == 1
    # A new apply (a new key) of the same file plans against what is stored.
    again = await client.cron.apply(declared("a", "b"))
    assert again.summary.unchanged == 2 and again.replayed is False


async def test_prune_keeps_to_its_label_so_files_coexist(jobs: CronJobs) -> None:
    await jobs.cron_apply(declared("a1", "a2"), prune=True, dry_run=False, label="file-a")
    await jobs.cron_apply(declared("b1"), prune=True, dry_run=False, label="file-b")
    await jobs.cron_create(declared("by-hand")[0])  # no label: no file's prune touches it
    result = await jobs.cron_apply(declared("a1"), prune=True, dry_run=False, label="file-a")
    assert [(i["action"], i["name"]) for i in result["plan"]] == [
        ("unchanged", "a1"),
        ("delete", "a2"),
    ]
    names = [j["name"] for j in (await jobs.cron_list(None, 50))["items"]]
    assert names == ["a1", "b1", "by-hand"]
    assert (await jobs.cron_get("b1"))["label"] == "file-b"
    # A job moved to another file takes that file's label: an update, said so.
    moved = await jobs.cron_apply(declared("a1", "b1"), prune=False, dry_run=False, label="file-b")
    assert [(i["action"], i["changes"]) for i in moved["plan"]] == [
        ("update", ["label"]),
        ("unchanged", []),
    ]
    assert (await jobs.cron_get("a1"))["label"] == "file-b"


async def test_an_apply_key_reused_for_another_apply_or_still_running_is_a_409(
    jobs: CronJobs,
) -> None:
    applying = CronApplyService(jobs, spec_from_wire)
    first = await applying.apply(declared("a"), prune=False, dry_run=False, apply_key="k")
    assert first.outcome is Outcome.CREATED and first.replayed is False
    again = await applying.apply(declared("a"), prune=False, dry_run=False, apply_key="k")
    assert again.outcome is Outcome.SAME and again.plan == first.plan  # the first one's result
    with pytest.raises(Conflict) as other:
        await applying.apply(declared("b"), prune=False, dry_run=False, apply_key="k")
    assert "another apply" in other.value.message
    # A first try still applying: the retry waits for it, then gives up with a clear 409.
    digest = request_hash(declared("c"), False, None)
    await jobs.cron.cron_apply_begin("acme", "slow", digest, T0, STALE)
    with pytest.raises(Conflict) as running:
        await CronApplyService(jobs, spec_from_wire, wait=0).apply(
            declared("c"), prune=False, dry_run=False, apply_key="slow"
        )
    assert running.value.details == {"applyKey": "slow", "state": "running"}
    assert await jobs.cron.cron_job_get_by_name("acme", "c") is None


async def test_more_than_a_thousand_jobs_in_one_apply(jobs: CronJobs) -> None:
    n = 2500
    names = [f"job-{i:05}" for i in range(n)]
    started = time.perf_counter()
    result = await jobs.cron_apply(declared(*names), prune=False, dry_run=False)
    seconds = time.perf_counter() - started
    assert result["summary"]["create"] == n
    assert all(i["cronJobId"] for i in result["plan"])
    print(f"apply created {n / seconds:,.0f} jobs/s")
    changed = declared(*names[:10], expression="0 3 * * *") + declared(*names[10:])
    again = await jobs.cron_apply(changed, prune=True, dry_run=False)
    assert again["summary"] == {"create": 0, "update": 10, "delete": 0, "unchanged": n - 10}
    page = await jobs.cron_list(None, 200)
    assert len(page["items"]) == 200 and page["nextCursor"]
