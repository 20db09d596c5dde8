"""Workflows in the SDK: ``client.workflows`` on both ``AsyncClient`` and ``Client``.

``WorkflowsClient`` holds the logic (async); ``WorkflowsSync`` is the blocking facade of the sync
``Client``. Both speak to a ``WorkflowsTransport`` (the HTTP transport, or in the server the
workflow services: ``api/inprocess_workflows.py``). Results are the API's resource models
(``resources/workflows.py``): a ``WorkflowRun`` has ``workflow_run_id``, ``status`` and
``tasks`` (each with ``name``, ``status``, ``execution_id``, ``output``, ``error``).
"""

from __future__ import annotations

import builtins
import uuid
from pathlib import Path
from typing import Any, Protocol

from tickwheel.client.blocking import Facade, Run, blocking
from tickwheel.client.requests import document_source
from tickwheel.resources.workflows import WorkflowDefinition, WorkflowList, WorkflowRun

__all__ = ["WorkflowDefinition", "WorkflowRun", "WorkflowsClient", "WorkflowsSync"]

Wire = dict[str, Any]
RunRef = uuid.UUID | str


class WorkflowsTransport(Protocol):
    async def workflow_apply(
        self, body: bytes, fmt: str, shared: bool = False
    ) -> tuple[Wire, bool]: ...

    async def workflow_list(self) -> builtins.list[Wire]: ...

    async def workflow_get(self, name: str, version: int | None) -> Wire: ...

    async def workflow_run_start(self, body: Wire, key: str | None) -> tuple[Wire, bool]: ...

    async def workflow_run_get(self, run_id: uuid.UUID) -> Wire: ...

    async def workflow_run_cancel(self, run_id: uuid.UUID) -> Wire: ...

    async def workflow_run_retry(self, run_id: uuid.UUID) -> Wire: ...


def _id(ref: RunRef) -> uuid.UUID:
    return ref if isinstance(ref, uuid.UUID) else uuid.UUID(ref)


class WorkflowsClient:
    def __init__(self, transport: WorkflowsTransport | None) -> None:
        self._transport = transport

    @property
    def transport(self) -> WorkflowsTransport:
        if self._transport is None:
            raise RuntimeError("this client's transport has no workflow API: use HTTP")
        return self._transport

    async def apply(
        self, source: str | Path | bytes, fmt: str | None = None, shared: bool = False
    ) -> tuple[WorkflowDefinition, bool]:
        """Registers a Workflow Definition: a path, or its content with ``fmt`` (yaml/json),
        into the key's tenant, or with ``shared`` into the shared registry (operator key).
        (the stored workflow, whether this call created it)."""
        body, fmt = document_source(source, fmt, "workflow", "yaml or json")
        wire, created = await self.transport.workflow_apply(body, fmt, shared)
        return WorkflowDefinition.from_wire(wire), created

    async def list(self) -> builtins.list[WorkflowDefinition]:
        """The latest version of each workflow, by name."""
        return WorkflowList.from_wire({"items": await self.transport.workflow_list()}).items

    async def get(self, name: str, version: int | None = None) -> WorkflowDefinition:
        """The latest version unless ``version``."""
        return WorkflowDefinition.from_wire(await self.transport.workflow_get(name, version))

    async def run(
        self,
        workflow: str,
        inputs: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        *,
        version: int | None = None,
    ) -> WorkflowRun:
        """Starts a run; the same key and body again returns the original run."""
        body: Wire = {"workflow": workflow, "inputs": inputs or {}}
        if version is not None:
            body["version"] = version
        wire, _created = await self.transport.workflow_run_start(body, idempotency_key)
        return WorkflowRun.from_wire(wire)

    async def get_run(self, run_id: RunRef) -> WorkflowRun:
        return WorkflowRun.from_wire(await self.transport.workflow_run_get(_id(run_id)))

    async def cancel(self, run_id: RunRef) -> WorkflowRun:
        """Cancels the tasks not yet started; the run ends CANCELLED."""
        return WorkflowRun.from_wire(await self.transport.workflow_run_cancel(_id(run_id)))

    async def retry(self, run_id: RunRef) -> WorkflowRun:
        """Runs the failed, skipped and cancelled tasks of a finished run again."""
        return WorkflowRun.from_wire(await self.transport.workflow_run_retry(_id(run_id)))


class WorkflowsSync(Facade):
    """``Client.workflows``: each method runs its ``WorkflowsClient`` twin on the client's loop
    (made from it: ``blocking.py``)."""

    def __init__(self, run: Run, inner: WorkflowsClient) -> None:
        super().__init__(run, inner)

    apply = blocking(WorkflowsClient.apply)
    list = blocking(WorkflowsClient.list)
    get = blocking(WorkflowsClient.get)
    run = blocking(WorkflowsClient.run)
    get_run = blocking(WorkflowsClient.get_run)
    cancel = blocking(WorkflowsClient.cancel)
    retry = blocking(WorkflowsClient.retry)
