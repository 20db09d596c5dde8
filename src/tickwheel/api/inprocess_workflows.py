"""The workflow API over the stores, in process: the in-process ``WorkflowsTransport``.

``client.workflows`` of an in-process client (the all-in-one server's per-tenant clients, the
Cron Service inside it, tests) goes through it, so a workflow run started in process obeys the
same rules (``tickwheel.app.workflows``, ``tickwheel.app.workflow_runs``) as ``POST
/v1/workflow-runs``: the same validation, the same idempotency keys. It lives with the API
because it composes what the routes compose (the workflow wire form of ``tickwheel.workflows``
and the client); the Cron Service may not import ``tickwheel.workflows`` itself.
"""

from __future__ import annotations

import builtins
import uuid
from typing import Any

from tickwheel.client.client import AsyncClient
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.domain.clock import Clock, SystemClock
from tickwheel.store.workflow_protocol import WorkflowStore
from tickwheel.workflows.definitions import WorkflowDefinitions
from tickwheel.workflows.runs import WorkflowRuns

Wire = dict[str, Any]


class InProcessWorkflowsTransport:
    def __init__(
        self, workflows: WorkflowStore, transport: InProcessTransport, clock: Clock | None = None
    ) -> None:
        self.clock = clock or SystemClock()
        # The task executions of a run go through the same tenant-bound execution transport.
        client = AsyncClient(transport=transport, clock=self.clock)
        self.definitions = WorkflowDefinitions(
            workflows, transport.store, transport.tenant, self.clock
        )
        self.runs = WorkflowRuns(workflows, client, transport.tenant, self.clock)

    async def workflow_apply(
        self, body: bytes, fmt: str, shared: bool = False
    ) -> tuple[Wire, bool]:
        return await self.definitions.apply(body, fmt, shared)

    async def workflow_list(self) -> builtins.list[Wire]:
        return await self.definitions.list()

    async def workflow_get(self, name: str, version: int | None) -> Wire:
        return await self.definitions.get(name, version)

    async def workflow_run_start(self, body: Wire, key: str | None) -> tuple[Wire, bool]:
        return await self.runs.start(
            body["workflow"], body.get("version"), body.get("inputs") or {}, key
        )

    async def workflow_run_get(self, run_id: uuid.UUID) -> Wire:
        return await self.runs.get(run_id)

    async def workflow_run_cancel(self, run_id: uuid.UUID) -> Wire:
        return await self.runs.cancel(run_id)

    async def workflow_run_retry(self, run_id: uuid.UUID) -> Wire:
        return await self.runs.retry(run_id)
