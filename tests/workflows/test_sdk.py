"""``client.workflows`` over HTTP through the real app, driven to the end by the orchestrator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.workflows.helpers import DIAMOND, TENANT, WorkflowRig
from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.client.client import AsyncClient
from tickwheel.client.transports.http import HttpTransport
from tickwheel.config import Settings
from tickwheel.domain.errors import Conflict, InvalidInput, NotFound
from tickwheel.domain.models import Scope

BASE = "http://testserver"


@pytest.fixture
async def client(rig: WorkflowRig) -> AsyncIterator[AsyncClient]:
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
    wire, created = await client.workflows.apply(path)
    assert created and wire["name"] == "nightly-report"
    assert not (await client.workflows.apply(DIAMOND, "yaml"))[1]
    with pytest.raises(InvalidInput):
        await client.workflows.apply(DIAMOND.replace("version: 1", "version: 2\nx: 1"), "yaml")
    assert [w["name"] for w in await client.workflows.list()] == ["nightly-report"]
    assert (await client.workflows.get("nightly-report"))["version"] == 1

    run = await client.workflows.run("nightly-report", {"day": "2026-03-01"}, "k1")
    again = await client.workflows.run("nightly-report", {"day": "2026-03-01"}, "k1")
    assert again["workflowRunId"] == run["workflowRunId"]
    await rig.settle()
    done = await client.workflows.get_run(run["workflowRunId"])
    assert done["status"] == "SUCCEEDED"
    with pytest.raises(Conflict):
        await client.workflows.cancel(run["workflowRunId"])
    with pytest.raises(Conflict):
        await client.workflows.retry(run["workflowRunId"])

    other = await client.workflows.run("nightly-report", {"day": "2026-03-02"}, version=1)
    cancelled = await client.workflows.cancel(other["workflowRunId"])
    assert cancelled["status"] == "CANCELLED"
    retried = await client.workflows.retry(other["workflowRunId"])
    assert retried["retryCount"] == 1
    await rig.settle()
    assert (await client.workflows.get_run(other["workflowRunId"]))["status"] == "SUCCEEDED"
    with pytest.raises(NotFound):
        await client.workflows.get("nope")
