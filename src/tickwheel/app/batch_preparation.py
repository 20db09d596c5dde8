"""A batch of submissions checked and made into items, all at once or a chunk at a time.

``ExecutionService.submit_many_ids`` hands a large batch to the store as chunks
(``Store.execution_insert_or_existing_chunks``): the store writes chunk k while this makes chunk
k+1, where the one statement made the submitting process and the database wait for each other
(docs/scaling.md, "A batch's items made together"). Two things make that safe:

- **Order.** The store writes the rows of a transaction in ``lock_order`` (tenant, then key).
  The batch is one tenant's, so its requests are sorted by key (stable, code point order)
  before they are cut into chunks: each chunk follows the previous one in that order, and
  duplicates of a key keep their request order. An item's outcome and id are its request's
  whatever the order (ids are drawn per request, by its place).
- **No read of the store while the store holds the chunks' connection.** The definitions the
  batch names are read first (``pin_ahead``): a chunk is made from what is in hand, so a batch
  never waits for a second connection of a pool whose others may be held the same way."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tickwheel.app.outcomes import ItemOutcome, Outcome
from tickwheel.domain.batch_items import PlainRun, ids_and_shards
from tickwheel.domain.definition_refs import require_name, to_uri
from tickwheel.domain.definitions import Definition
from tickwheel.domain.errors import TickwheelError
from tickwheel.domain.models import Execution
from tickwheel.domain.submission import (
    NewExecution,
    SubmitRequest,
    check_request_shape,
    prepare_execution,
)
from tickwheel.observability.tracing import current_context

if TYPE_CHECKING:
    from tickwheel.app.executions import ExecutionService

DefinitionKey = tuple[str, int | None]


@dataclass(frozen=True)
class PreparedBatch:
    """A checked batch: an outcome per request so far (``INVALID`` ones), and the valid items
    with their places (``places[i]``: the index of ``items[i]``'s request)."""

    results: list[ItemOutcome[Execution] | None]
    places: list[int]
    items: list[NewExecution]


class BatchPreparation:
    """One batch's preparation: ``add`` checks and makes the items of some of its requests into
    ``batch``, as ``prepare_execution`` would one by one, with one instant, one trace context,
    the ids drawn at once and the definitions read once for the whole batch."""

    def __init__(
        self, service: ExecutionService, requests: Sequence[SubmitRequest], bare_names: bool
    ) -> None:
        self.service = service
        self.requests = requests
        self.bare_names = bare_names
        # One instant and one trace context for the whole call: its items are submitted
        # together (one transaction, one span), and asking for each item cost more than its id.
        self.now = service.clock.now()
        self.trace_context = current_context()
        self.ids, self.shards = ids_and_shards(self.now, len(requests))
        self.uris: dict[str, str] = {}  # a bare name's URI, made once per batch
        # Kept by the URI as written (one name for each valid one): the batch's items then read
        # their definition without reading the name out of the URI again. None: not registered.
        self.definitions: dict[DefinitionKey, Definition | None] = {}
        self.run: PlainRun | None = None  # the last plain request's: its like are made from it
        self.batch = PreparedBatch([None] * len(requests), [], [])

    def _uri(self, written: str) -> str:
        if not self.bare_names:
            return written
        uris = self.uris
        return uris.get(written) or uris.setdefault(written, to_uri(written))

    async def pin_ahead(self) -> None:
        """Reads the definition of each (URI, version) of the batch that a request names
        validly (its first such request's), so that ``add`` reads none."""
        service, now, limits = self.service, self.now, self.service.limits
        definitions = self.definitions
        decided: set[tuple[object, object]] = set()  # (URI, version) as written: pinned or not
        for request in self.requests:
            uri, version = request.definition_uri, request.definition_version
            written = (uri, version)
            try:
                if written in decided:  # the batch's common case: a set lookup per request
                    continue
            except TypeError:  # unhashable, so of no type the shape check lets through
                continue
            if type(uri) is not str or (version is not None and type(version) is not int):
                continue  # refused by the shape check, in add
            key = (self._uri(uri), version)
            try:
                check_request_shape(request, now, limits, key[0])
                name = require_name(key[0])
            except TickwheelError:
                continue  # refused in add; another request may name it validly
            decided.add(written)
            if key not in definitions:
                definitions[key] = await service.pinned(name, version)

    async def add(self, indices: Iterable[int]) -> list[NewExecution]:
        """The items of the requests at ``indices`` (the valid ones, in that order), also added
        to ``batch``; an invalid request's ``INVALID`` outcome is set in ``batch.results``."""
        service, requests, now = self.service, self.requests, self.now
        limits, tenant, trace_context = service.limits, service.tenant, self.trace_context
        ids, shards, definitions = self.ids, self.shards, self.definitions
        results = self.batch.results
        made_items: list[NewExecution] = []
        places: list[int] = []
        run = self.run
        for index in indices:
            request = requests[index]
            if run is not None:
                made = run.make(request, ids[index], shards[index])
                if made is not None:
                    places.append(index)
                    made_items.append(made)
                    continue
            uri = request.definition_uri
            if self.bare_names:
                uri = self._uri(uri)
            try:
                check_request_shape(request, now, limits, uri)
                key = (uri, request.definition_version)
                if key in definitions:
                    definition = definitions[key]
                else:  # not read ahead: read now (InvalidInput for a URI without a name)
                    definition = definitions[key] = await service.pinned(require_name(uri), key[1])
                if definition is None:
                    raise service.no_definition(uri, key[1])
                # The submitter's trace, continued by the attempts; not part of the request,
                # so not of its fingerprint either: a retry from another trace is the same.
                trace = request.trace_context or trace_context
                made_id = (ids[index], shards[index])
                item = prepare_execution(request, definition, tenant, now, trace, uri, made_id)
            except TickwheelError as exc:
                results[index] = ItemOutcome(Outcome.INVALID, error=exc)
            else:
                places.append(index)
                made_items.append(item)
                run = PlainRun.of(request, item) or run
        self.run = run
        self.batch.places.extend(places)
        self.batch.items.extend(made_items)
        return made_items

    async def chunks(self, size: int) -> AsyncIterator[list[NewExecution]]:
        """The batch's items in ``size``-request chunks, its requests sorted by key (the lock
        order of one tenant's items), each chunk made when the store asks for it."""
        requests = self.requests
        keys: list[Any] = [r.idempotency_key for r in requests]
        if set(map(type, keys)) == {str}:  # the common case, sorted by the keys themselves
            order = sorted(range(len(requests)), key=keys.__getitem__)
        else:
            order = sorted(range(len(requests)), key=lambda i: _sort_key(requests[i]))
        for start in range(0, len(order), size):
            yield await self.add(order[start : start + size])


def _sort_key(request: SubmitRequest) -> str:
    """The key ``rows.lock_order`` sorts an item by (a request without a key, or with one
    that is no string and so refused, as the empty key)."""
    key = request.idempotency_key
    return key if type(key) is str else ""
