"""``client.workflows`` over HTTP through the real app, driven to the end by the orchestrator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.workflows.helpers import DIAMOND, TENANT, WorkflowRig
from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.api.inprocess_workflows import InProcessWorkflowsTransport
from tickwheel.client.client import AsyncClient
from tickwheel.client.transports.http import HttpTransport
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.client.workflows import WorkflowDefinition, WorkflowRun
from tickwheel.config import Settings
from tickwheel.domain.errors import Conflict, InvalidInput, NotFound
from tickwheel.domain.models import Scope

BASE = "http://testserver"


@pytest.fixture(params=["http", "inprocess"])
async def client(rig: WorkflowRig, request: pytest.FixtureRequest) -> AsyncIterator[AsyncClient]:
    """The SDK over HTTP, and in process (the all-in-one server's clients): the same models."""
    if request.param == "inprocess":
        executions = InProcessTransport(rig.store, TENANT, rig.clock)
        workflows = InProcessWorkflowsTransport(rig.workflows, executions, rig.clock)
        async with AsyncClient(
            transport=executions, clock=rig.clock, workflows_transport=workflows
        ) as c:
            yield c
        return
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    app = httpx.ASGITransport(app=create_app(rig.store, settings, rig.clock))
    _, key = await create_key(rig.store, TENANT, Scope.ADMIN, "sdk", rig.clock.now())
    http = httpx.AsyncClient(transport=app, base_url=BASE)
    transport = HttpTransport(BASE, key, http=http, backoff=0)
    async with AsyncClient(transport=transport, clock=rig.clock) as c:
        yield c


async def test_apply_run_get_cancel_retry(
    rig: WorkflowRig, client: AsyncClient, tmp_path: Path
) -> None:
    path = tmp_path / "nightly.yaml"
    path.write_text(DIAMOND)
    workflow, created = await client.workflows.apply(path)
    assert created and isinstance(workflow, WorkflowDefinition)
    assert workflow.name == "nightly-report" and workflow.tasks[0].name == "extract"
    assert not (await client.workflows.apply(DIAMOND, "yaml"))[1]
    with pytest.raises(InvalidInput):
        await client.workflows.apply(DIAMOND.replace("version: 1", "version: 2\nx: 1"), "yaml")
    assert [w.name for w in await client.workflows.list()] == ["nightly-report"]
    assert (await client.workflows.get("nightly-report")).version == 1

    run = await client.workflows.run("nightly-report", {"day": "2026-03-01"}, "k1")
    again = await client.workflows.run("nightly-report", {"day": "2026-03-01"}, "k1")
    assert isinstance(run, WorkflowRun) and again.workflow_run_id == run.workflow_run_id
    await rig.settle()
    done = await client.workflows.get_run(run.workflow_run_id)
    assert done.status == "SUCCEEDED" and all(t.status == "SUCCEEDED" for t in done.tasks)
    with pytest.raises(Conflict):
        await client.workflows.cancel(run.workflow_run_id)
    with pytest.raises(Conflict):
        await client.workflows.retry(str(run.workflow_run_id))

    other = await client.workflows.run("nightly-report", {"day": "2026-03-02"}, version=1)
    cancelled = await client.workflows.cancel(other.workflow_run_id)
    assert cancelled.status == "CANCELLED"
    retried = await client.workflows.retry(other.workflow_run_id)
    assert retried.retry_count == 1
    await rig.settle()
    assert (await client.workflows.get_run(other.workflow_run_id)).status == "SUCCEEDED"
    with pytest.raises(NotFound):
        await client.workflows.get("nope")
