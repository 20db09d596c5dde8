"""Workflows in the SDK: ``client.workflows`` on both ``AsyncClient`` and ``Client``.

``WorkflowsClient`` holds the logic (async); ``WorkflowsSync`` is the blocking facade of the sync
``Client``. Both speak to a ``WorkflowsTransport`` (the HTTP transport). Results are the API's
JSON objects: a workflow run has ``workflowRunId``, ``status`` and ``tasks`` (each with
``name``, ``status``, ``executionId``, ``output``, ``error``).
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tickwheel.domain.definition_files import format_from_filename

T = TypeVar("T")
Runner = Callable[[Coroutine[Any, Any, T]], T]
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
    ) -> tuple[Wire, bool]:
        """Registers a Workflow Definition: a path, or its content with ``fmt`` (yaml/json),
        into the key's tenant, or with ``shared`` into the shared registry (operator key).
        (the stored workflow, whether this call created it)."""
        if isinstance(source, Path) or (isinstance(source, str) and fmt is None):
            path = Path(source)
            body, fmt = path.read_bytes(), fmt or format_from_filename(path.name)
        else:
            body = source.encode() if isinstance(source, str) else source
        if fmt is None:
            raise ValueError("say which format the workflow content is in: yaml or json")
        return await self.transport.workflow_apply(body, fmt, shared)

    async def list(self) -> builtins.list[Wire]:
        return await self.transport.workflow_list()

    async def get(self, name: str, version: int | None = None) -> Wire:
        return await self.transport.workflow_get(name, version)

    async def run(
        self,
        workflow: str,
        inputs: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        *,
        version: int | None = None,
    ) -> Wire:
        """Starts a run; the same key and body again returns the original run."""
        body: Wire = {"workflow": workflow, "inputs": inputs or {}}
        if version is not None:
            body["version"] = version
        wire, _created = await self.transport.workflow_run_start(body, idempotency_key)
        return wire

    async def get_run(self, run_id: RunRef) -> Wire:
        return await self.transport.workflow_run_get(_id(run_id))

    async def cancel(self, run_id: RunRef) -> Wire:
        return await self.transport.workflow_run_cancel(_id(run_id))

    async def retry(self, run_id: RunRef) -> Wire:
        return await self.transport.workflow_run_retry(_id(run_id))


class WorkflowsSync:
    """``Client.workflows``: each method runs its ``WorkflowsClient`` twin on the client's loop."""

    def __init__(self, run: Runner[Any], inner: WorkflowsClient) -> None:
        self._run, self._inner = run, inner

    def apply(
        self, source: str | Path | bytes, fmt: str | None = None, shared: bool = False
    ) -> tuple[Wire, bool]:
        result: tuple[Wire, bool] = self._run(self._inner.apply(source, fmt, shared))
        return result

    def list(self) -> builtins.list[Wire]:
        result: builtins.list[Wire] = self._run(self._inner.list())
        return result

    def get(self, name: str, version: int | None = None) -> Wire:
        result: Wire = self._run(self._inner.get(name, version))
        return result

    def run(
        self,
        workflow: str,
        inputs: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        *,
        version: int | None = None,
    ) -> Wire:
        result: Wire = self._run(
            self._inner.run(workflow, inputs, idempotency_key, version=version)
        )
        return result

    def get_run(self, run_id: RunRef) -> Wire:
        result: Wire = self._run(self._inner.get_run(run_id))
        return result

    def cancel(self, run_id: RunRef) -> Wire:
        result: Wire = self._run(self._inner.cancel(run_id))
        return result

    def retry(self, run_id: RunRef) -> Wire:
        result: Wire = self._run(self._inner.retry(run_id))
        return result
