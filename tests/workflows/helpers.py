"""A workflow rig: registration, runs, the orchestrator, a scheduler and a worker on one store and
one fake clock; ``settle()`` drives them with ``run_once`` until nothing moves."""

from __future__ import annotations

import uuid
from typing import Any

import yaml

from tests.factories import T0, stored
from tickwheel.client.client import AsyncClient
from tickwheel.client.models import ExecutionInfo
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.definitions import definition_from_document
from tickwheel.engine.scheduler import Scheduler
from tickwheel.engine.worker import Worker
from tickwheel.observability.metrics import Metrics
from tickwheel.store.factory import workflow_store_for
from tickwheel.store.protocol import Store
from tickwheel.workflows.definitions import WorkflowDefinitions
from tickwheel.workflows.orchestrator import Orchestrator
from tickwheel.workflows.runs import WorkflowRuns

TENANT = "acme"
JOBS = "tests.workflows.jobs"

DIAMOND = """
name: nightly-report
version: 1
inputs: {day: {type: date, required: true}}
tasks:
  - name: extract
    definition: registry://jobs/extract
    inputs: {day: "${{ inputs.day }}"}
  - name: clean
    definition: registry://jobs/clean
    dependsOn: [extract]
    inputs: {rows: "${{ tasks.extract.outputs.rows }}"}
  - name: stats
    definition: registry://jobs/stats
    dependsOn: [extract]
    inputs: {rows: "${{ tasks.extract.outputs.rows }}"}
  - name: publish
    definition: registry://jobs/publish
    dependsOn: [clean, stats]
    inputs: {clean: "${{ tasks.clean.outputs.uri }}", stats: "${{ tasks.stats.outputs.uri }}"}
"""

JOB_DOCS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "extract": ({"day": {"type": "date", "required": True}}, {"rows": "array"}),
    "clean": ({"rows": {"type": "array", "required": True}}, {"uri": "uri"}),
    "stats": ({"rows": {"type": "array", "required": True}}, {"uri": "uri"}),
    "publish": (
        {"clean": {"type": "uri", "required": True}, "stats": {"type": "uri", "required": True}},
        {"published": "string"},
    ),
    "step": ({"name": {"type": "string", "required": True}}, {"done": "string"}),
    "seed": ({}, {"base": "integer"}),
    "part": (
        {
            "base": {"type": "integer", "required": True},
            "index": {"type": "integer", "required": True},
        },
        {"value": "integer"},
    ),
    "gather": (
        {"values": {"type": "array", "required": True}},
        {"total": "integer", "count": "integer"},
    ),
    "gate": ({"name": {"type": "string", "required": True}}, {"done": "string"}),
}


def job_doc(name: str) -> dict[str, Any]:
    inputs, outputs = JOB_DOCS[name]
    return {
        "name": name,
        "version": 1,
        "inputs": inputs,
        "outputs": outputs,
        "execution": {"type": "python", "entrypoint": f"{JOBS}:{name}"},
        "timeout": 5,
        "retry": {"maxAttempts": 1},
    }


def chain(*tasks: dict[str, Any], name: str = "chain") -> str:
    """A workflow of ``step`` tasks: each dict gives name, dependsOn and triggerRule."""
    doc = {
        "name": name,
        "version": 1,
        "tasks": [
            {"definition": "registry://jobs/step", "inputs": {"name": t["name"]}, **t}
            for t in tasks
        ],
    }
    return yaml.safe_dump(doc)


class WorkflowRig:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.clock = FakeClock(T0)
        self.metrics = Metrics()  # the orchestrators' own, read exactly by the tests
        self.workflows = workflow_store_for(store)
        transport = InProcessTransport(store, TENANT, self.clock)
        self.client = AsyncClient(transport=transport, clock=self.clock)
        self.definitions = WorkflowDefinitions(self.workflows, store, TENANT, self.clock)
        self.runs = WorkflowRuns(self.workflows, self.client, TENANT, self.clock)
        self.orchestrator = self.make_orchestrator("o1")
        self.scheduler = Scheduler(store, self.clock)
        self.worker = Worker(store, self.clock, worker_id="w1")

    def make_orchestrator(self, owner: str) -> Orchestrator:
        return Orchestrator(
            self.workflows,
            self.store,
            lambda tenant: self.client,
            clock=self.clock,
            owner=owner,
            metrics=self.metrics,
        )

    async def register_jobs(self) -> None:
        for name in JOB_DOCS:
            doc = job_doc(name)
            assert await self.store.definition_insert(stored(definition_from_document(doc)))

    async def apply(self, text: str) -> dict[str, Any]:
        wire, _ = await self.definitions.apply(text, "yaml")
        return wire

    async def start(self, name: str, key: str | None = None, **inputs: Any) -> uuid.UUID:
        wire, created = await self.runs.start(name, None, inputs, key)
        assert created
        return uuid.UUID(wire["workflowRunId"])

    async def settle(self, rounds: int = 50) -> None:
        for _ in range(rounds):
            await self.scheduler.run_once()
            claimed = await self.worker.run_once()
            await self.worker.drain()
            consumed = await self.orchestrator.run_once()
            if not claimed and not consumed:
                return
        raise AssertionError("the workflow did not settle")

    async def get(self, run_id: uuid.UUID) -> dict[str, Any]:
        return await self.runs.get(run_id)

    async def tasks(self, run_id: uuid.UUID) -> dict[str, dict[str, Any]]:
        return {t["name"]: t for t in (await self.get(run_id))["tasks"]}

    async def executions(self) -> dict[str, ExecutionInfo]:
        page = await self.client.list(limit=500)
        return {e.idempotency_key or "": e for e in page.items}
