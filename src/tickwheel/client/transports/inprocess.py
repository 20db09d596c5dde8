"""The in-process transport: the application layer's services (``tickwheel.app``) behind the
transport interface. The API routes, the all-in-one server and services such as the Cron
Service all go through it, so every path into the store obeys the same rules; this class only
turns the services' domain objects and outcomes into the wire values the client expects."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Sequence
from typing import Any

from tickwheel.app.context import TenantContext
from tickwheel.app.definition_cache import DefinitionCache
from tickwheel.app.definitions import DefinitionService
from tickwheel.app.executions import MAX_PAGE, ExecutionService
from tickwheel.app.outcomes import IdOutcome, ItemOutcome, Outcome
from tickwheel.client.models import BatchItemResult, ExecutionInfo
from tickwheel.client.transport import Wire
from tickwheel.client.wire import (
    attempt_to_wire,
    decode_cursor,
    definition_to_wire,
    encode_cursor,
    event_to_wire,
    execution_to_wire,
)
from tickwheel.domain.definitions import Definition
from tickwheel.domain.models import Execution, ExecutionFilter
from tickwheel.domain.submission import SubmitRequest
from tickwheel.resources.executions import FieldSets, SubmitReceipt
from tickwheel.store.protocol import StoredDefinition

__all__ = ["MAX_PAGE", "InProcessTransport"]

# What a batch item's outcome is over HTTP (``POST /v1/executions:batch``).
_ITEM_STATUS = {
    Outcome.CREATED: 201,
    Outcome.SAME: 200,
    Outcome.CONFLICT: 409,
    Outcome.INVALID: 422,
}


class InProcessTransport(TenantContext):
    """``InProcessTransport(store, tenant, clock, limits, run_policy)``: a ``TenantContext``."""

    # The services are made per call from the context's attributes, so that whoever changes one
    # (a test swaps the cache) changes what the next call uses; they hold no state of their own.
    @property
    def definitions(self) -> DefinitionCache:
        """The definition cache of the submit path (``cache``)."""
        return self.cache

    @definitions.setter
    def definitions(self, cache: DefinitionCache) -> None:
        self.cache = cache

    @property
    def executions_service(self) -> ExecutionService:
        return ExecutionService(self.store, self.tenant, self.clock, self.limits, cache=self.cache)

    @property
    def definitions_service(self) -> DefinitionService:
        return DefinitionService(
            self.store, self.tenant, self.clock, run_policy=self.run_policy, cache=self.cache
        )

    async def close(self) -> None:
        """The store belongs to whoever opened it; nothing to release here."""

    # -- definitions ----------------------------------------------------------------------------

    async def definition_apply(
        self, body: bytes, fmt: str, shared: bool = False
    ) -> tuple[Wire, bool]:
        """Registers into this tenant's definitions, or with ``shared`` into the shared registry
        (the caller checked the operator scope: this transport trusts whoever built it)."""
        written = await self.definitions_service.apply_file(body, fmt, shared)
        return definition_to_wire(written.value), written.created

    async def apply_definition(
        self, definition: Definition, shared: bool = False
    ) -> tuple[StoredDefinition, bool]:
        written = await self.definitions_service.apply(definition, shared)
        return written.value, written.created

    async def definition_list(self) -> builtins.list[Wire]:
        return [definition_to_wire(d) for d in await self.definitions_service.list()]

    async def definition_versions(self, name: str) -> builtins.list[Wire]:
        return [definition_to_wire(d) for d in await self.definitions_service.versions(name)]

    async def definition_get(self, name: str, version: int) -> Wire:
        return definition_to_wire(await self.definitions_service.get(name, version))

    # -- executions -----------------------------------------------------------------------------

    async def submit(self, request: SubmitRequest) -> tuple[Wire, bool]:
        written = await self.executions_service.submit(request)
        return execution_to_wire(written.value), written.created

    async def submit_many(self, requests: Sequence[SubmitRequest]) -> builtins.list[Wire]:
        """One result per request: its status as the batch route answers it (201, 200, 409,
        422) with the execution or the error."""
        return [item_to_wire(item) for item in await self.executions_service.submit_many(requests)]

    # What the SDK on this transport (and the API's single submit) read as models: made from the
    # records directly, equal to what ``from_wire`` of the JSON above gives, without writing the
    # JSON and parsing it back (``tests/unit/test_resources.py``).

    async def submit_model(self, request: SubmitRequest) -> tuple[ExecutionInfo, bool]:
        written = await self.executions_service.submit(request)
        return ExecutionInfo.of(written.value), written.created

    async def submit_many_models(
        self, requests: Sequence[SubmitRequest], *, bare_names: bool = False
    ) -> builtins.list[BatchItemResult]:
        """``bare_names``: as ``ExecutionService.prepare_many``'s (the SDK's requests)."""
        service = self.executions_service
        outcomes = await service.submit_many(requests, bare_names=bare_names)
        return item_results(outcomes, release=True)

    async def submit_many_receipts(
        self,
        requests: Sequence[SubmitRequest],
        *,
        bare_names: bool = False,
        in_chunks: bool = False,
    ) -> builtins.list[SubmitReceipt]:
        """One receipt per request (``SubmitReceipt``): the SDK's ``answer="ids"`` and the
        batch route's ``Prefer: return=minimal``. ``in_chunks``: as
        ``ExecutionService.submit_many_ids``'s (the SDK's, one batch at a time; not the
        route's, which serves several at once)."""
        service = self.executions_service
        outcomes = await service.submit_many_ids(
            requests, bare_names=bare_names, in_chunks=in_chunks
        )
        return receipts(outcomes, release=True)

    async def get(self, execution_id: uuid.UUID) -> Wire:
        return execution_to_wire(await self.executions_service.get(execution_id))

    async def list(self, flt: ExecutionFilter, cursor: str | None, limit: int) -> Wire:
        before = decode_cursor(cursor) if cursor else None
        page = await self.executions_service.list(flt, before, limit)
        last = page.items[-1].execution_id if page.items else None
        return {
            "items": [execution_to_wire(e) for e in page.items],
            "nextCursor": encode_cursor(last) if page.more and last else None,
        }

    async def attempts(self, execution_id: uuid.UUID) -> builtins.list[Wire]:
        return [attempt_to_wire(a) for a in await self.executions_service.attempts(execution_id)]

    async def output(self, execution_id: uuid.UUID) -> Wire:
        output = await self.executions_service.output(execution_id)
        return {"output": output.output, "outputReference": output.output_reference}

    async def history(self, execution_id: uuid.UUID) -> builtins.list[Wire]:
        return [event_to_wire(ev) for ev in await self.executions_service.history(execution_id)]

    async def cancel(self, execution_id: uuid.UUID) -> Wire:
        return execution_to_wire(await self.executions_service.cancel(execution_id))

    async def replay(self, execution_id: uuid.UUID) -> Wire:
        return execution_to_wire(await self.executions_service.replay(execution_id))


def item_result(item: ItemOutcome[Execution]) -> BatchItemResult:
    """``BatchItemResult.from_wire(item_to_wire(item))``, without the JSON round."""
    return item_results([item])[0]


def item_results(
    items: Sequence[ItemOutcome[Execution]], *, release: bool = False
) -> builtins.list[BatchItemResult]:
    """``item_result`` of each: the models built from the records (``Execution.of``), the sets
    of the fields given shared by the answers of one call. With ``release`` (``items`` a list
    its caller gives up): each item is dropped from it once its answer is made, so that its
    record is freed meanwhile rather than after the last answer. A batch's answers are most of
    the objects it makes; with the records alive beside them, the garbage collector's young
    collections ran twice as often, and moved the records to the oldest generation, whose
    growth is what starts a full collection (over every object of the process)."""
    execution_sets: FieldSets = {}
    result_sets: dict[bool, set[str]] = {}
    results = []
    held: builtins.list[Any] | None = (
        items if release and isinstance(items, builtins.list) else None
    )
    for index, item in enumerate(items):
        if held is not None:
            held[index] = None
        status = _ITEM_STATUS[item.outcome]
        if item.error is not None:
            exc = item.error
            error = {"code": exc.code, "message": exc.message, "details": exc.details}
            results.append(BatchItemResult.of(status, None, error, result_sets))
        else:
            assert item.value is not None  # CREATED and SAME carry the execution
            info = ExecutionInfo.of(item.value, execution_sets)
            results.append(BatchItemResult.of(status, info, None, result_sets))
    return results


def receipts(
    items: builtins.list[IdOutcome], *, release: bool = False
) -> builtins.list[SubmitReceipt]:
    """A receipt for each outcome, its status and error as ``item_results`` gives them; with
    ``release``, each outcome dropped from ``items`` once its receipt is made."""
    status_of, new = _ITEM_STATUS, tuple.__new__
    made = []
    for index, (outcome, execution_id, exc) in enumerate(items):
        if release:
            items[index] = None  # type: ignore[call-overload]
        if exc is None:  # SubmitReceipt(...), without the named tuple's __new__
            made.append(new(SubmitReceipt, (status_of[outcome], execution_id, None)))
        else:
            error = {"code": exc.code, "message": exc.message, "details": exc.details}
            made.append(SubmitReceipt(status_of[outcome], None, error))
    return made


def item_to_wire(item: ItemOutcome[Execution]) -> Wire:
    status = _ITEM_STATUS[item.outcome]
    if item.error is not None:
        exc = item.error
        error = {"code": exc.code, "message": exc.message, "details": exc.details}
        return {"status": status, "error": error}
    assert item.value is not None  # CREATED and SAME carry the execution
    return {"status": status, "execution": execution_to_wire(item.value)}
