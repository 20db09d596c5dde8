"""A cron rig: the Cron Service, the cron API rules and an in-process client on one store and
one fake clock, so a test moves time by hand and calls ``tick()`` instead of sleeping."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import fields
from datetime import datetime, timedelta
from typing import Any

from tests.factories import definition, stored
from tickwheel.api.inprocess_workflows import InProcessWorkflowsTransport
from tickwheel.client.client import AsyncClient
from tickwheel.client.models import ExecutionInfo
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.cron.jobs import CronJobs
from tickwheel.cron.service import CronService
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.services.settings import CronSettings
from tickwheel.store.cron_protocol import CronStore
from tickwheel.store.factory import cron_store_for, workflow_store_for
from tickwheel.store.protocol import AttemptResult, Store
from tickwheel.store.workflow_protocol import WorkflowStore

TENANT = "acme"
ALL_SHARDS = list(range(1024))
GREETING = """
name: greeting
version: 1
inputs: {who: {type: string, required: true}}
tasks:
  - {name: hello, definition: registry://jobs/greet, inputs: {name: "${{ inputs.who }}"}}
"""
"""A one-task workflow over the ``greet`` definition, for jobs that target a workflow."""


class CronRig:
    def __init__(self, store: Store, start: datetime) -> None:
        self.store = store
        self.clock = FakeClock(start)
        self.cron: CronStore = cron_store_for(store)
        self.workflows: WorkflowStore = workflow_store_for(store)
        self.jobs = CronJobs(self.cron, store, TENANT, "tester", self.clock, self.workflows)
        self.transport = InProcessTransport(store, TENANT, self.clock)
        runs = InProcessWorkflowsTransport(self.workflows, self.transport, self.clock)
        self.client = AsyncClient(
            transport=self.transport, clock=self.clock, workflows_transport=runs
        )
        self.service = self.make_service("svc-1")

    def make_service(self, owner: str, cron: CronStore | None = None, **kw: Any) -> CronService:
        """A lead of 60 s unless given: the rig's tests count occurrences against it (the
        default, 90 s, has its own test)."""
        tuning = {f.name: kw.pop(f.name) for f in fields(CronSettings) if f.name in kw}
        tuning.setdefault("lead", timedelta(seconds=60))
        return CronService(
            cron or self.cron,
            lambda tenant: self.client,
            clock=self.clock,
            owner=owner,
            settings=CronSettings(**tuning),
            **kw,
        )

    async def register(self, **overrides: Any) -> None:
        assert await self.store.definition_insert(stored(definition(**overrides)))

    async def register_workflow(self, text: str = GREETING) -> None:
        """The workflow and the definition its task runs."""
        await self.register()
        await self.client.workflows.apply(text, "yaml")

    async def workflow_runs(self, job: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """The job's workflow runs by occurrence (as the API shows them), read back through the
        history's links."""
        runs = {}
        for row in await self.history(job["cronJobId"]):
            if row["workflowRunId"] and row["outcome"] == "SUBMITTED":
                run = await self.client.workflows.get_run(row["workflowRunId"])
                runs[row["occurrence"]] = run.to_wire()
        return runs

    async def create(self, **doc: Any) -> dict[str, Any]:
        body = {"name": "nightly", "definitionUri": "greet", "inputs": {"name": "Ada"}, **doc}
        wire, created = await self.jobs.cron_create(body)
        assert created
        return wire

    async def tick(self, service: CronService | None = None) -> int:
        """Runs the service until nothing more is due now."""
        total = 0
        while did := await (service or self.service).run_once():
            total += did
        return total

    async def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        await self.tick()

    async def executions(self) -> dict[str, ExecutionInfo]:
        """Every execution, by idempotency key."""
        page = await self.client.list(limit=500)
        assert page.next_cursor is None
        return {e.idempotency_key or "": e for e in page.items}

    async def execute_ats(self) -> list[datetime]:
        return sorted(e.execute_at for e in (await self.executions()).values())

    async def history(self, ref: str) -> list[dict[str, Any]]:
        """Oldest first (the API's pages are newest first)."""
        rows: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = await self.jobs.cron_history(ref, cursor, 200)
            rows += page["items"]
            if not (cursor := page["nextCursor"]):
                return rows[::-1]

    async def outcomes(self, ref: str) -> list[tuple[str, str]]:
        """(occurrence, outcome) oldest first."""
        return [(r["occurrence"], r["outcome"]) for r in await self.history(ref)]

    async def start(self, execution_id: uuid.UUID) -> int:
        """Moves one execution to RUNNING as a worker would; returns its fencing token."""
        await self.store.execution_promote_due(ALL_SHARDS, 1000, self.clock.now())
        claimed = await self.store.execution_claim_ready(
            "w1", 1000, timedelta(seconds=300), self.clock.now()
        )
        token = None
        for e in claimed:
            if e.execution_id == execution_id:
                token = e.fencing_token
            else:  # put back what we did not mean to start
                assert e.fencing_token is not None
                await self.store.execution_release(
                    e.execution_id, e.fencing_token, self.clock.now()
                )
        assert token is not None, f"{execution_id} was not READY"
        return token

    async def finish(self, execution_id: uuid.UUID) -> None:
        token = await self.start(execution_id)
        result = AttemptResult(
            execution_id, token, AttemptStatus.SUCCEEDED, ExecutionStatus.SUCCEEDED, output={}
        )
        assert await self.store.attempt_finish(result, self.clock.now())


def keys_of(executions: Mapping[str, ExecutionInfo], job: Mapping[str, Any]) -> list[str]:
    prefix = f"cron:{job['cronJobId']}:"
    return sorted(k.removeprefix(prefix) for k in executions if k.startswith(prefix))
