"""A batch of submissions checked and made into items, all at once or a chunk at a time.

``ExecutionService.submit_many_ids`` may hand a large batch to the store as chunks
(``Store.execution_insert_or_existing_chunks``): the store writes chunk k while this makes chunk
k+1, where the one statement made the submitting process and the database wait for each other.
Two things make that safe:

- **Order.** The store writes the rows of a transaction in ``lock_order`` (tenant, then key).
  The batch is one tenant's, so its requests are sorted by key (stable, code point order)
  before they are cut into chunks: each chunk follows the previous one in that order, and
  duplicates of a key keep their request order. An item's outcome and id are its request's
  whatever the order (ids are drawn per request, by its place).
- **No read of the store while the store holds the chunks' connection.** The definitions the
  batch names are read first (``pin_ahead``): a chunk is made from what is in hand, so a batch
  never waits for a second connection of a pool whose others may be held the same way."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from tickwheel.app.outcomes import ItemOutcome, Outcome
from tickwheel.domain.batch_items import PlainRun, ids_and_shards
from tickwheel.domain.definition_refs import require_name, to_uri
from tickwheel.domain.definitions import Definition
from tickwheel.domain.errors import TickwheelError
from tickwheel.domain.ids import uuid7_run, uuid_of
from tickwheel.domain.models import Execution
from tickwheel.domain.sharding import shard_of_int
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
_NAMED = attrgetter("definition_uri", "definition_version")
_ID = attrgetter("execution_id")
_KEY = attrgetter("idempotency_key")
_FINGERPRINT = attrgetter("request_fingerprint")
_URI = attrgetter("definition_uri")


@dataclass(frozen=True)
class PreparedBatch:
    """A checked batch: an outcome per request so far (``INVALID`` ones), and the valid items
    with their places (``places[i]``: the index of ``items[i]``'s request)."""

    results: list[ItemOutcome[Execution] | None]
    places: list[int]
    items: list[NewExecution]


@dataclass(frozen=True)
class SentBatch:
    """What a batch made ``chunks`` keeps of its valid items once the store has taken them: per
    item, in the order made (``places[i]``: the index of its request), what settling its
    outcome reads (``ExecutionService.settle_sent``). No item is kept: a ``NewExecution`` and
    its dictionary per item alive until the batch was answered were, with the rows read back,
    what moved most objects into the garbage collector's oldest generation, whose growth is
    what starts a full collection of the whole process (docs/scaling.md)."""

    results: list[ItemOutcome[Execution] | None]
    places: list[int] = field(default_factory=list)
    ids: list[uuid.UUID] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list)
    fingerprints: list[str] = field(default_factory=list)
    uris: list[str] = field(default_factory=list)

    def keep(self, places: list[int], items: list[NewExecution]) -> None:
        """Takes what it needs of ``items`` (made for the requests at ``places``)."""
        self.places.extend(places)
        self.ids.extend(map(_ID, items))
        self.keys.extend(map(_KEY, items))
        self.fingerprints.extend(map(_FINGERPRINT, items))
        self.uris.extend(map(_URI, items))


class BatchPreparation:
    """One batch's preparation, made ``whole`` or by ``chunks``: ``add`` checks and makes the
    items of some of its requests into ``batch``, as ``prepare_execution`` would one by one, with
    one instant, one trace context, the ids drawn at once and the definitions read once for the
    whole batch."""

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
        self.uris: dict[str, str] = {}  # a bare name's URI, made once per batch
        # Kept by the URI as written (one name for each valid one): the batch's items then read
        # their definition without reading the name out of the URI again. None: not registered.
        self.definitions: dict[DefinitionKey, Definition | None] = {}
        self.run: PlainRun | None = None  # the last plain request's: its like are made from it
        self.well_formed: str | None = None  # the last URI checked: a batch names one most often
        self.batch = PreparedBatch([None] * len(requests), [], [])

    async def whole(self) -> PreparedBatch:
        """The batch made in one piece, in the order of its requests."""
        ids, shards = ids_and_shards(self.now, len(self.requests))
        places, items = await self.add(range(len(self.requests)), ids, shards)
        self.batch.places.extend(places)
        self.batch.items.extend(items)
        return self.batch

    def _uri(self, written: str) -> str:
        if not self.bare_names:
            return written
        uris = self.uris
        return uris.get(written) or uris.setdefault(written, to_uri(written))

    async def pin_ahead(self) -> None:
        """Reads the definition of each (URI, version) of the batch that some request names
        validly (as ``add`` would, after that request's shape check: a definition named only by
        refused requests is not read, and its rate limit's bucket not made), so that ``add``
        reads none. A batch names one or a few: the requests are walked until each is decided,
        most often one request."""
        service, now, limits = self.service, self.now, self.service.limits
        pending = set(map(_NAMED, self.requests))
        for request in self.requests:
            if not pending:
                break
            written = (request.definition_uri, request.definition_version)
            if written not in pending:  # decided already
                continue
            uri = self._uri(written[0])
            try:
                check_request_shape(request, now, limits, uri)
                name = require_name(uri)
            except TickwheelError:
                continue  # refused in add; another request may name it validly
            pending.discard(written)
            key = (uri, written[1])
            if key not in self.definitions:
                self.definitions[key] = await service.pinned(name, key[1])

    async def add(
        self, indices: Iterable[int], ids: Iterable[uuid.UUID], shards: Iterable[int]
    ) -> tuple[list[int], list[NewExecution]]:
        """The items of the requests at ``indices`` (the valid ones, in that order, with their
        places), with the ids and shards given for them (one each, in the same order); an
        invalid request's ``INVALID`` outcome is set in ``batch.results``. No coroutine per
        item: the one await is a definition not read yet (none after ``pin_ahead``)."""
        service, requests, now = self.service, self.requests, self.now
        limits, tenant, trace_context = service.limits, service.tenant, self.trace_context
        definitions, bare_names = self.definitions, self.bare_names
        results = self.batch.results
        made_items: list[NewExecution] = []
        places: list[int] = []
        run, well_formed = self.run, self.well_formed
        for index, execution_id, shard in zip(indices, ids, shards, strict=True):
            request = requests[index]
            if run is not None:
                made = run.make(request, execution_id, shard)
                if made is not None:
                    places.append(index)
                    made_items.append(made)
                    continue
            uri = request.definition_uri
            if bare_names:
                uri = self._uri(uri)
            try:
                check_request_shape(request, now, limits, uri, well_formed)
                well_formed = uri  # (the check refuses any other)
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
                made_id = (execution_id, shard)
                item = prepare_execution(request, definition, tenant, now, trace, uri, made_id)
            except TickwheelError as exc:
                results[index] = ItemOutcome(Outcome.INVALID, error=exc)
            else:
                places.append(index)
                made_items.append(item)
                run = PlainRun.of(request, item) or run
        self.run, self.well_formed = run, well_formed
        return places, made_items

    async def chunks(
        self, first: int, size: int, sent: SentBatch
    ) -> AsyncIterator[list[NewExecution]]:
        """The batch's items in chunks of ``first`` requests, then of ``size`` (the database
        waits for the first one: a small one starts it sooner), its requests sorted by key
        (the lock order of one tenant's items), each chunk made when the store asks for it and
        kept in ``sent`` once the store has taken it (when it asks for the next, or ends)."""
        requests = self.requests
        keys: list[Any] = [r.idempotency_key for r in requests]
        if set(map(type, keys)) == {str}:  # the common case, sorted by the keys themselves
            order = sorted(range(len(requests)), key=keys.__getitem__)
        else:
            order = sorted(range(len(requests)), key=lambda i: _sort_key(requests[i]))
        # The ids' values drawn at once (what ids_and_shards draws), made into ids by chunks:
        # the hash of each id's shard was most of the time before a first chunk could go out.
        count = len(requests)
        run = uuid7_run(self.now, count)
        if run is None:  # (rare: see uuid7_run) each drawn by itself, all now
            all_ids, all_shards = ids_and_shards(self.now, count)
        bounds = [0, *range(min(first, size), count, size), count]
        for start, end in itertools.pairwise(bounds):
            part = order[start:end]
            if run is not None:
                values = [run[i] for i in part]
                ids, shards = list(map(uuid_of, values)), list(map(shard_of_int, values))
            else:
                ids, shards = [all_ids[i] for i in part], [all_shards[i] for i in part]
            places, items = await self.add(part, ids, shards)
            yield items
            sent.keep(places, items)


def _sort_key(request: SubmitRequest) -> str:
    """The key ``rows.lock_order`` sorts an item by (a request without a key, or with one
    that is no string and so refused, as the empty key)."""
    key = request.idempotency_key
    return key if type(key) is str else ""
