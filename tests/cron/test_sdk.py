"""``client.cron`` over both transports (HTTP through the real app, and the in-process cron
rules), and the Cron Service driving the HTTP transport, as ``tickwheel cron run`` does."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from tests.cron.helpers import GREETING
from tests.factories import T0, definition, stored
from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.client.client import AsyncClient
from tickwheel.client.cron import ApplyResult, AuditEntry, Deleted
from tickwheel.client.sync import Client
from tickwheel.client.transports.http import HttpTransport
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.config import Settings
from tickwheel.cron.jobs import CronJobs
from tickwheel.cron.service import CronService
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.errors import Conflict, InvalidInput, NotFound
from tickwheel.domain.models import Scope
from tickwheel.services.settings import CronSettings
from tickwheel.store.factory import cron_store_for, workflow_store_for
from tickwheel.store.protocol import Store
from tickwheel.workflows.definitions import WorkflowDefinitions

BASE = "http://testserver"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture(params=["http", "inprocess"])
async def client(
    request: pytest.FixtureRequest, store: Store, clock: FakeClock
) -> AsyncIterator[AsyncClient]:
    await store.definition_insert(stored(definition()))
    if request.param == "http":
        settings = Settings(_env_file=None)  # type: ignore[call-arg]
        app = httpx.ASGITransport(app=create_app(store, settings, clock))
        _, key = await create_key(store, "acme", Scope.SUBMIT, "sdk", clock.now())
        http = httpx.AsyncClient(transport=app, base_url=BASE)
        transport = HttpTransport(BASE, key, http=http, backoff=0)
        async with AsyncClient(transport=transport, clock=clock) as c:
            yield c
    else:
        jobs = CronJobs(cron_store_for(store), store, "acme", "sdk test", clock)
        inprocess = InProcessTransport(store, "acme", clock)
        async with AsyncClient(transport=inprocess, clock=clock, cron_transport=jobs) as c:
            yield c


async def test_the_whole_cron_api_through_the_sdk(client: AsyncClient) -> None:
    job = await client.cron.create(
        "nightly", "greet", "0 2 * * *", "Europe/Berlin", {"name": "Ada"}, jitter=10
    )
    assert job.definition_version is None and job.wire["definitionVersionPolicy"] == "latest"
    assert job.next_run_at is not None and len(job.next_fire_times) == 5
    assert (
        await client.cron.create(
            "nightly", "greet", "0 2 * * *", "Europe/Berlin", {"name": "Ada"}, jitter=10
        )
    ).cron_job_id == job.cron_job_id
    with pytest.raises(Conflict):
        await client.cron.create("nightly", "greet", "0 3 * * *", "Europe/Berlin", {"name": "Ada"})
    with pytest.raises(InvalidInput) as bad:
        await client.cron.create("x", "greet", "0 2 * * *", "Europe/Berln", {"name": "Ada"})
    assert [e.path for e in bad.value.errors] == ["timezone"]
    assert [j.name for j in (await client.cron.list()).items] == ["nightly"]
    assert (await client.cron.get("nightly")).cron_job_id == job.cron_job_id
    changed = await client.cron.update(job.cron_job_id, version=1, expression="0 4 * * *")
    assert changed.version == 2 and changed.expression == "0 4 * * *"
    with pytest.raises(Conflict):
        await client.cron.update("nightly", version=1, jitter=0)
    assert (await client.cron.pause("nightly")).status == "PAUSED"
    assert (await client.cron.resume("nightly", catch_up=True)).status == "ACTIVE"
    assert (await client.cron.history("nightly")).items == []
    audit = await client.cron.audit("nightly")
    assert all(isinstance(a, AuditEntry) for a in audit)
    assert [a.action for a in audit] == [
        "created",
        "updated",
        "paused",
        "resumed",
    ]
    fires = await client.cron.preview("30 2 * * *", "Europe/Berlin", T0.replace(month=3, day=28), 2)
    assert [f.dst for f in fires] == ["shifted", None]  # 29 March: 02:30 does not exist
    plan = await client.cron.apply(
        [
            {
                "name": "other",
                "definitionUri": "greet",
                "expression": "@daily",
                "inputs": {"name": "Bo"},
            }
        ],
        prune=True,
        dry_run=True,
    )
    assert isinstance(plan, ApplyResult) and plan.dry_run and plan.replayed is None
    assert [(p.action, p.name) for p in plan.plan] == [("create", "other"), ("delete", "nightly")]
    deleted = await client.cron.delete("nightly")
    assert isinstance(deleted, Deleted) and deleted.deleted
    assert deleted.cron_job.cron_job_id == job.cron_job_id
    with pytest.raises(NotFound):
        await client.cron.get("nightly")


async def test_apply_reads_a_yaml_file(client: AsyncClient, tmp_path: Path) -> None:
    path = tmp_path / "cron.yaml"
    path.write_text(
        "cronJobs:\n"
        "  - name: nightly\n"
        "    definitionUri: greet\n"
        "    expression: '0 2 * * *'\n"
        "    timezone: Europe/Berlin\n"
        "    inputs: {name: Ada}\n"
    )
    plan = await client.cron.apply(path)
    assert plan.summary.create == 1 and plan.replayed is False
    again = await client.cron.apply(str(path))
    assert again.summary.unchanged == 1 and again.plan[0].cron_job_id == plan.plan[0].cron_job_id


async def test_the_service_over_http_materialises_through_the_api(
    store: Store, clock: FakeClock
) -> None:
    """``tickwheel cron run``: its own cron tables, executions only through the HTTP API."""
    await store.definition_insert(stored(definition()))
    app = httpx.ASGITransport(app=create_app(store, Settings(_env_file=None), clock))  # type: ignore[call-arg]
    _, key = await create_key(store, "acme", Scope.SUBMIT, "cron", clock.now())
    http = httpx.AsyncClient(transport=app, base_url=BASE)
    async with AsyncClient(transport=HttpTransport(BASE, key, http=http), clock=clock) as client:
        job = await client.cron.create("every-minute", "greet", "* * * * *", inputs={"name": "Ada"})
        service = CronService(cron_store_for(store), lambda _: client, clock=clock, tenant="acme")
        for _ in range(3):
            clock.advance(60)
            await service.run_once()
        page = await client.list(limit=50)
        keys = sorted(e.idempotency_key or "" for e in page.items)
        assert keys == [f"cron:{job.cron_job_id}:2026-03-01T12:0{m}:00Z" for m in (1, 2, 3, 4)]
        history = await client.cron.history(job.cron_job_id)
        assert [h.outcome for h in history.items] == ["SUBMITTED"] * 4
        assert all(isinstance(h.execution_id, uuid.UUID) for h in history.items)


def test_the_sync_client_has_cron_too() -> None:
    with Client("http://127.0.0.1:9", None, timeout=0.2) as client:
        assert hasattr(client.cron, "create") and hasattr(client.cron, "preview")
        with pytest.raises(httpx.TransportError):
            client.cron.list()


LEAD_60 = timedelta(seconds=60)


async def test_a_tick_larger_than_the_api_batch_limit_is_submitted_in_chunks(
    store: Store, clock: FakeClock
) -> None:
    """20 every-second jobs, 60 occurrences each within the lead: 1,200 items, more than the
    1,000 one batch request may carry."""
    await store.definition_insert(stored(definition()))
    app = httpx.ASGITransport(app=create_app(store, Settings(_env_file=None), clock))  # type: ignore[call-arg]
    _, key = await create_key(store, "acme", Scope.SUBMIT, "cron", clock.now())
    http = httpx.AsyncClient(transport=app, base_url=BASE)
    async with AsyncClient(transport=HttpTransport(BASE, key, http=http), clock=clock) as client:
        docs = [
            {"name": f"s{i}", "definitionUri": "greet", "expression": "* * * * * *",
             "inputs": {"name": "Ada"}}
            for i in range(20)
        ]  # fmt: skip
        await client.cron.apply(docs)
        service = CronService(
            cron_store_for(store),
            lambda _: client,
            clock=clock,
            settings=CronSettings(batch=50, lead=LEAD_60),
        )
        assert await service.run_once() == 20
        assert service.counts["SUBMITTED"] == 20 * 60
        assert len((await client.list(limit=500)).items) == 500


async def test_a_workflow_target_round_trips_through_the_sdk(
    client: AsyncClient, store: Store, clock: FakeClock
) -> None:
    await WorkflowDefinitions(workflow_store_for(store), store, "", clock).apply(
        GREETING, "yaml", shared=True
    )
    job = await client.cron.create(
        "wf-nightly", None, "0 2 * * *", "Europe/Berlin", {"who": "Ada"}, workflow="greeting"
    )
    assert job.target == "workflow" and job.workflow == "greeting"
    assert job.workflow_version is None and job.definition_uri is None
    assert job.wire["workflowVersionPolicy"] == "latest"
    assert (await client.cron.get("wf-nightly")).to_wire() == job.to_wire()
    again = await client.cron.create(
        "wf-nightly", None, "0 2 * * *", "Europe/Berlin", {"who": "Ada"}, workflow="greeting"
    )
    assert again.cron_job_id == job.cron_job_id
    pinned = await client.cron.update(
        "wf-nightly", version=1, workflow="greeting", workflow_version=1
    )
    assert pinned.workflow_version == 1 and pinned.wire["workflowVersionPolicy"] == "pinned"
    [listed] = (await client.cron.list()).items
    assert (listed.target, listed.workflow) == ("workflow", "greeting")
    with pytest.raises(InvalidInput) as bad:
        await client.cron.create("x", "greet", "@daily", inputs={"who": "A"}, workflow="greeting")
    assert [e.path for e in bad.value.errors] == ["workflow"]
    with pytest.raises(InvalidInput) as unknown:
        await client.cron.create("y", None, "@daily", workflow="nope")
    assert [e.path for e in unknown.value.errors] == ["workflow.name"]
    with pytest.raises(ValueError, match="workflow_version needs workflow="):
        await client.cron.create("z", "greet", "@daily", workflow_version=2)
    switched = await client.cron.update("wf-nightly", definition="greet", inputs={"name": "Ada"})
    assert (switched.target, switched.definition_uri) == ("definition", "registry://jobs/greet")
    assert switched.workflow is None


async def test_the_service_over_http_starts_workflow_runs_through_the_api(
    store: Store, clock: FakeClock
) -> None:
    """``tickwheel cron run`` with a workflow-targeted job: ``POST /v1/workflow-runs`` with the
    occurrence's key, once per occurrence however often a tick is retried."""
    await store.definition_insert(stored(definition()))
    await WorkflowDefinitions(workflow_store_for(store), store, "", clock).apply(
        GREETING, "yaml", shared=True
    )
    app = httpx.ASGITransport(app=create_app(store, Settings(_env_file=None), clock))  # type: ignore[call-arg]
    _, key = await create_key(store, "acme", Scope.SUBMIT, "cron", clock.now())
    http = httpx.AsyncClient(transport=app, base_url=BASE)
    async with AsyncClient(transport=HttpTransport(BASE, key, http=http), clock=clock) as client:
        job = await client.cron.create(
            "wf", None, "* * * * *", inputs={"who": "Ada"}, workflow="greeting"
        )
        service = CronService(cron_store_for(store), lambda _: client, clock=clock, tenant="acme")
        for _ in range(2):
            clock.advance(60)
            await service.run_once()
            await service.run_once()
        history = (await client.cron.history(job.cron_job_id)).items
        assert [h.outcome for h in history] == ["SUBMITTED"] * 2
        assert all(h.workflow_run_status == "RUNNING" for h in history)
        for h in history:
            assert h.workflow_run_id is not None
            run = await client.workflows.get_run(h.workflow_run_id)
            occurrence = h.occurrence.isoformat().replace("+00:00", "Z")
            assert run.idempotency_key == f"cron-wf:{job.cron_job_id}:{occurrence}"
        assert len((await client.list(limit=50)).items) == 2  # one task execution per run
