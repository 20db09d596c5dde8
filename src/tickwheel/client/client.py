"""The Python SDK: ``AsyncClient`` holds the logic, ``Client`` (``sync.py``) is a thin blocking
facade over it.

Both take a transport: HTTP for applications talking to a tickwheel API, in-process for code that
runs inside the server (the Cron Service, the workflow orchestrator) and for tests."""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from datetime import datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Unpack, overload

from tickwheel.client.models import (
    AttemptInfo,
    BatchItemResult,
    DefinitionApplied,
    ExecutionInfo,
    ExecutionPage,
    SubmitReceipt,
)
from tickwheel.client.requests import (
    ExecutionRef,
    as_id,
    connection_settings,
    definition_uri,
    document_source,
    submit_request,
    with_uris,
)
from tickwheel.client.transport import Transport, is_http, is_in_process
from tickwheel.domain.clock import Clock, SystemClock
from tickwheel.domain.models import ExecutionFilter
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import SubmitOptions, SubmitRequest
from tickwheel.resources.definitions import Definition, DefinitionList

if TYPE_CHECKING:
    # Each loaded on first use: the sub-clients (``cron`` brings yaml and the cron domain,
    # ``flow`` the app layer), the submissions on a caller's connection (the app layer and
    # the store protocols) and the history's model. A command of the CLI that only reads an
    # execution over HTTP imports none of them.
    from tickwheel.client.cron import CronClient, CronTransport
    from tickwheel.client.flow import FlowClient
    from tickwheel.client.webhooks import WebhooksClient
    from tickwheel.client.workflows import WorkflowsClient, WorkflowsTransport
    from tickwheel.resources.executions import HistoryEvent

T = TypeVar("T")


class AsyncClient:
    """The SDK. ``AsyncClient()`` with no arguments talks to ``TICKWHEEL_URL`` with
    ``TICKWHEEL_API_KEY`` (``connection_settings``); arguments given win over both."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        transport: Transport | None = None,
        clock: Clock | None = None,
        timeout: float = 10.0,
        cron_transport: CronTransport | None = None,
        workflows_transport: WorkflowsTransport | None = None,
    ) -> None:
        if transport is None:
            from tickwheel.client.transports.http import HttpTransport

            transport = HttpTransport(*connection_settings(url, api_key), timeout=timeout)
        self.transport: Transport = transport
        self.clock = clock or SystemClock()
        if is_http(transport):  # the HTTP transport speaks the cron and workflow APIs too
            cron_transport = transport if cron_transport is None else cron_transport
            workflows_transport = transport if workflows_transport is None else workflows_transport
        self._cron_transport = cron_transport
        self._workflows_transport = workflows_transport

    # The sub-clients, each made (and its module imported) on first use.

    @cached_property
    def cron(self) -> CronClient:
        """Cron jobs (``client/cron.py``)."""
        from tickwheel.client.cron import CronClient

        return CronClient(self._cron_transport)

    @cached_property
    def workflows(self) -> WorkflowsClient:
        """Workflows and workflow runs (``client/workflows.py``)."""
        from tickwheel.client.workflows import WorkflowsClient

        return WorkflowsClient(self._workflows_transport)

    @cached_property
    def webhooks(self) -> WebhooksClient:
        """Failure notifications (``client/webhooks.py``), over HTTP."""
        from tickwheel.client.webhooks import WebhooksClient

        return WebhooksClient(self.transport if is_http(self.transport) else None)

    @cached_property
    def flow(self) -> FlowClient:
        """Pauses and circuit breakers (``client/flow.py``)."""
        from tickwheel.client.flow import FlowClient

        return FlowClient(self.transport)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.transport.close()

    # -- definitions ----------------------------------------------------------------------------

    async def apply_definition(
        self, source: str | Path | bytes, fmt: str | None = None, shared: bool = False
    ) -> DefinitionApplied:
        """Registers a Job Definition File: a path, or its content with ``fmt`` (yaml/json/xml),
        into the key's tenant; with ``shared``, into the shared registry every tenant resolves
        (needs an operator key)."""
        body, fmt = document_source(source, fmt, "definition", "yaml, json or xml")
        wire, created = await self.transport.definition_apply(body, fmt, shared)
        return DefinitionApplied(Definition.from_wire(wire), created)

    async def definitions(self) -> builtins.list[Definition]:
        """The latest version of each definition the key's tenant resolves."""
        return _definitions(await self.transport.definition_list())

    async def definition_versions(self, name: str) -> builtins.list[Definition]:
        """Every version of one definition, oldest first."""
        return _definitions(await self.transport.definition_versions(name))

    # -- executions -----------------------------------------------------------------------------

    async def submit(
        self,
        definition: str,
        inputs: dict[str, Any] | None = None,
        execute_at: datetime | None = None,
        idempotency_key: str | None = None,
        *,
        connection: Any = None,
        **options: Unpack[SubmitOptions],
    ) -> ExecutionInfo:
        """``options``: ``SubmitOptions`` (the definition's ``version``, None for the latest,
        and the rest of a submission's optional fields). With ``connection`` (a client of
        ``tickwheel.connect_async``): inside the caller's open transaction on that connection
        (``client/caller_tx.py``)."""
        request = submit_request(definition, inputs, execute_at, idempotency_key, **options)
        if connection is not None:
            from tickwheel.client.caller_tx import Pending

            pending = await Pending.prepare(self.transport, request)
            return await pending.run_async(connection)
        if is_in_process(self.transport):
            info, _created = await self.transport.submit_model(request)
            return info
        wire, _created = await self.transport.submit(request)
        return ExecutionInfo.from_wire(wire)

    async def submit_after(
        self,
        delay: timedelta | float,
        definition: str,
        inputs: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        *,
        connection: Any = None,
        **options: Unpack[SubmitOptions],
    ) -> ExecutionInfo:
        """A delayed run is only a convenience: ``executeAt = now + delay`` on the client."""
        at = self.after(delay)
        return await self.submit(
            definition, inputs, at, idempotency_key, connection=connection, **options
        )

    def after(self, delay: timedelta | float) -> datetime:
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
        if seconds < 0:
            raise ValueError("delay must not be negative")
        return self.clock.now() + timedelta(seconds=seconds)

    @overload
    async def submit_many(
        self,
        requests: Iterable[SubmitRequest],
        *,
        connection: Any = None,
        answer: Literal["full"] = "full",
    ) -> builtins.list[BatchItemResult]: ...

    @overload
    async def submit_many(
        self, requests: Iterable[SubmitRequest], *, connection: Any = None, answer: Literal["ids"]
    ) -> builtins.list[SubmitReceipt]: ...

    async def submit_many(
        self, requests: Iterable[SubmitRequest], *, connection: Any = None, answer: Answer = "full"
    ) -> builtins.list[BatchItemResult] | builtins.list[SubmitReceipt]:
        """One result per request, in order. ``answer="full"``: a ``BatchItemResult`` with the
        whole execution; ``answer="ids"``: a ``SubmitReceipt`` (status, execution id, error),
        the same submission and the same outcome per item for a fraction of the client's
        work (over HTTP: ``Prefer: return=minimal``). With ``connection``: the valid items
        inside the caller's open transaction."""
        ids = wants_ids(answer)
        if connection is None and is_in_process(self.transport):
            # The service takes a bare name as its URI itself: no copy of each request.
            batch = requests if isinstance(requests, builtins.list) else builtins.list(requests)
            if ids:  # a large batch made a chunk at a time while the last is written
                return await self.transport.submit_many_receipts(
                    batch, bare_names=True, in_chunks=True
                )
            return await self.transport.submit_many_models(batch, bare_names=True)
        items = with_uris(requests)
        if connection is not None:
            from tickwheel.client.caller_tx import PendingBatch

            pending = await PendingBatch.prepare(self.transport, items)
            results = await pending.run_async(connection)
            return [r.receipt() for r in results] if ids else results
        if ids:
            return await self.transport.submit_many_receipts(items)
        return [BatchItemResult.from_wire(w) for w in await self.transport.submit_many(items)]

    async def get(self, execution_id: ExecutionRef) -> ExecutionInfo:
        return ExecutionInfo.from_wire(await self.transport.get(as_id(execution_id)))

    async def list(
        self,
        *,
        status: Iterable[ExecutionStatus | str] = (),
        definition: str | None = None,
        idempotency_key: str | None = None,
        execute_from: datetime | None = None,
        execute_to: datetime | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> ExecutionPage:
        flt = ExecutionFilter(
            statuses=tuple(ExecutionStatus(s) for s in status),
            definition_uri=definition_uri(definition) if definition else None,
            idempotency_key=idempotency_key,
            execute_from=execute_from,
            execute_to=execute_to,
        )
        return ExecutionPage.from_wire(await self.transport.list(flt, cursor, limit))

    async def attempts(self, execution_id: ExecutionRef) -> builtins.list[AttemptInfo]:
        wires = await self.transport.attempts(as_id(execution_id))
        return [AttemptInfo.from_wire(w) for w in wires]

    async def output(self, execution_id: ExecutionRef) -> Any:
        """The whole output, also when it was too large to keep inline (``outputReference``)."""
        return (await self.transport.output(as_id(execution_id)))["output"]

    async def history(self, execution_id: ExecutionRef) -> builtins.list[HistoryEvent]:
        """Its cancels and replays, oldest first (``attempts`` lists its tries)."""
        from tickwheel.resources.executions import HistoryList

        wires = await self.transport.history(as_id(execution_id))
        return HistoryList.from_wire({"items": wires}).items

    async def cancel(self, execution_id: ExecutionRef) -> ExecutionInfo:
        """Not started: CANCELLED now. RUNNING: its worker is asked to stop it; the answer is
        still RUNNING with ``cancel_requested_at`` set (``wait`` for the CANCELLED end).
        Finished: Conflict."""
        return ExecutionInfo.from_wire(await self.transport.cancel(as_id(execution_id)))

    async def replay(self, execution_id: ExecutionRef) -> ExecutionInfo:
        return ExecutionInfo.from_wire(await self.transport.replay(as_id(execution_id)))

    async def wait(
        self, execution_id: ExecutionRef, timeout: float = 60.0, *, poll: float = 0.2
    ) -> ExecutionInfo:
        """Polls until the execution finishes (SUCCEEDED, FAILED or CANCELLED); raises
        ``TimeoutError`` with the last status seen when ``timeout`` seconds pass first."""
        deadline = self.clock.now() + timedelta(seconds=timeout)
        interval = poll
        while True:
            info = await self.get(execution_id)
            if info.finished:
                return info
            if self.clock.now() >= deadline:
                raise TimeoutError(
                    f"execution {info.execution_id} is still {info.status} after {timeout} s"
                )
            await self.clock.sleep(interval)
            interval = min(interval * 1.5, 2.0)


Answer = Literal["full", "ids"]
"""What ``submit_many`` answers: full results, or receipts (``SubmitReceipt``)."""


def wants_ids(answer: str) -> bool:
    """Whether ``answer`` asks for receipts; ValueError for a word that is neither (a typo must
    not silently give the full answer)."""
    if answer not in ("full", "ids"):
        raise ValueError(f"answer must be 'full' or 'ids', not {answer!r}")
    return answer == "ids"


def _definitions(wires: builtins.list[dict[str, Any]]) -> builtins.list[Definition]:
    return DefinitionList.from_wire({"items": wires}).items
