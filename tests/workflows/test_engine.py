"""The orchestrator inside ``tickwheel server``'s Engine, in real time: a diamond run finishes
with no ``run_once`` driven by hand (woken by Topic.WORKFLOW), on both backends."""

from __future__ import annotations

import asyncio
import uuid

from tests.workflows.helpers import DIAMOND, TENANT, WorkflowRig
from tickwheel.client.client import AsyncClient
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.config import Settings
from tickwheel.server import Engine
from tickwheel.store.protocol import Store
from tickwheel.workflows.runs import WorkflowRuns


async def test_the_engine_runs_a_diamond_to_the_end(store: Store) -> None:
    rig = WorkflowRig(store)
    await rig.register_jobs()
    await rig.apply(DIAMOND)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    engine = Engine(store, settings, cron=True, orchestrator=True)
    assert engine.orchestrator is not None
    client = AsyncClient(transport=InProcessTransport(store, TENANT))
    runs = WorkflowRuns(rig.workflows, client, TENANT)
    engine.start()
    try:
        wire, _ = await runs.start("nightly-report", None, {"day": "2026-03-01"}, "k")
        run_id = uuid.UUID(wire["workflowRunId"])
        async with asyncio.timeout(20):
            while (run := await runs.get(run_id))["status"] == "RUNNING":  # noqa: ASYNC110 - polls the store
                await asyncio.sleep(0.05)
    finally:
        await engine.stop(1.0)
    assert run["status"] == "SUCCEEDED", run
    assert run["tasks"][-1]["output"] == {"published": "s3://clean/3+s3://stats/2026-03-01-a"}
