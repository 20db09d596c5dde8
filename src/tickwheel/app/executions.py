"""The Execution rules for one tenant: submit (validation, the definition it pins, idempotency
keys), read, cancel and replay. Every path into the store goes through here, so the API, the
SDK beside the store, the Cron Service and the orchestrator obey the same rules.

A submission's outcome is ``CREATED`` (stored now) or ``SAME`` (its idempotency key was used for
the same request: the stored execution). A key used for a different request is a Conflict and a
wrong request an InvalidInput, both raised; in a batch they become that item's ``CONFLICT`` or
``INVALID`` outcome and the other items go on."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from prometheus_client import Counter

from tickwheel.app.batch_preparation import BatchPreparation, PreparedBatch, SentBatch
from tickwheel.app.context import TenantContext
from tickwheel.app.outcomes import IdOutcome, ItemOutcome, Outcome, Written
from tickwheel.domain.clock import store_now
from tickwheel.domain.definition_refs import name_of, stored_name
from tickwheel.domain.definitions import Definition
from tickwheel.domain.errors import Conflict, FieldError, InvalidInput, NotFound
from tickwheel.domain.models import Attempt, Execution, ExecutionEvent, ExecutionFilter
from tickwheel.domain.states import TERMINAL, cancel_refusal, replay_refusal
from tickwheel.domain.submission import (
    NewExecution,
    SubmitRequest,
    check_request_shape,
    prepare_execution,
)
from tickwheel.observability.metrics import definition_label, process_metrics
from tickwheel.observability.tracing import current_context, mark_submitted, submit_span
from tickwheel.store.protocol import InsertOutcome

MAX_PAGE = 500
CHUNK = 250
"""Requests per chunk of a batch answered with ids in chunks (``submit_many_ids``), after the
first of ``FIRST_CHUNK``: the sizes that were fastest of 125, 250 and 500 after a first of 100,
50 or a full chunk (docs/scaling.md)."""
FIRST_CHUNK = 100


@dataclass(frozen=True)
class ExecutionSlice:
    """One page of the list, newest first; ``more`` says whether another page follows (its
    first row is older than the last of ``items``)."""

    items: list[Execution]
    more: bool


@dataclass(frozen=True)
class Output:
    """An execution's output, read from the side table when it was stored by reference."""

    output: Any
    output_reference: str | None


class ExecutionService(TenantContext):
    """Made of a ``TenantContext`` (its ``run_policy`` is registration's: unused here)."""

    # -- submit ---------------------------------------------------------------------------------

    async def submit(self, request: SubmitRequest) -> Written[Execution]:
        """``CREATED`` or ``SAME``; InvalidInput or Conflict (raised) write nothing."""
        with submit_span(1) as span:
            item = await self._prepare(request)
            written = self.settle(item, await self.store.execution_insert_one(item))
            if span is not None:  # traced: the id, as text (a UUID's text costs more than its id)
                mark_submitted(span, [written.value.execution_id])
        return written

    async def prepare(self, request: SubmitRequest) -> NewExecution:
        """The checked execution a submission would store (InvalidInput raised, nothing
        written): the first half of a submit whose insert runs in the caller's transaction
        (``Store.execution_insert_on``)."""
        with submit_span(1) as span:
            item = await self._prepare(request)
            mark_submitted(span, [item.execution_id])
        return item

    def settle(self, item: NewExecution, inserted: InsertOutcome) -> Written[Execution]:
        """The second half: ``CREATED`` or ``SAME``, or Conflict when the key was used for a
        different request."""
        existing = inserted.execution
        if inserted.created:  # _count_created of one
            _series(process_metrics().submitted, existing.definition_uri).inc()
            return Written(Outcome.CREATED, _same_or_conflict(item, existing))
        return Written(Outcome.SAME, _same_or_conflict(item, existing))

    async def submit_many(
        self, requests: Sequence[SubmitRequest], *, bare_names: bool = False
    ) -> builtins.list[ItemOutcome[Execution]]:
        """One transaction for every valid item, one outcome per request in its order: an
        invalid item (``INVALID``) or a reused key (``CONFLICT``) does not stop the others.
        ``bare_names``: see ``prepare_many``."""
        with submit_span(len(requests)):
            batch = await self._prepare_many(requests, bare_names)
            inserted = await self.store.execution_insert_many(batch.items)
            return self.settle_many(batch, inserted)

    async def submit_many_ids(
        self,
        requests: Sequence[SubmitRequest],
        *,
        bare_names: bool = False,
        in_chunks: bool = False,
    ) -> builtins.list[IdOutcome]:
        """``submit_many``, each outcome with its execution's id instead of the execution:
        the same checks, the same insert and the same rules for a reused key (the original's
        id, or a ``CONFLICT``), only a lighter answer. A caller that wants ids (as PgQueuer's
        batch enqueue gives) no longer pays for records it drops: the store makes none for
        the rows it inserts (``execution_insert_or_existing``).

        ``in_chunks``: a batch of more than ``CHUNK`` requests is made a chunk at a time while
        the store writes the previous chunk, in one transaction (``batch_preparation``), the
        same answer. It pays for a caller that submits one batch at a time with a core to spare
        for the database (the SDK on the in-process transport); where the process serves
        several batches at once (the API), the event loop already overlaps one's Python with
        another's statement, and the chunks' extra work there is a loss (docs/scaling.md)."""
        with submit_span(len(requests)):
            if not in_chunks or len(requests) <= CHUNK:
                batch = await self._prepare_many(requests, bare_names)
                existing = await self.store.execution_insert_or_existing(batch.items)
                return self.settle_ids(batch, existing)
            preparation = BatchPreparation(self, requests, bare_names)
            await preparation.pin_ahead()
            sent = SentBatch(preparation.batch.results)
            chunks = preparation.chunks(FIRST_CHUNK, CHUNK, sent)
            existing = await self.store.execution_insert_or_existing_chunks(chunks)
            return self.settle_sent(sent, existing)

    async def prepare_many(
        self, requests: Sequence[SubmitRequest], *, bare_names: bool = False
    ) -> PreparedBatch:
        """The first half of ``submit_many`` (the insert may run in the caller's transaction):
        the valid items to insert, the invalid ones already settled as ``INVALID``. With
        ``bare_names`` (the SDK's, which accepts them: never a request from outside), a
        definition named by its bare name is taken as its URI (``to_uri``), as if the request
        said it: the same checks, fingerprint and messages, without a copy of the request."""
        with submit_span(len(requests)):
            return await self._prepare_many(requests, bare_names)

    async def _prepare_many(
        self, requests: Sequence[SubmitRequest], bare_names: bool
    ) -> PreparedBatch:
        """Each item as ``_prepare`` does it, the definitions read once per batch."""
        return await BatchPreparation(self, requests, bare_names).whole()

    def settle_many(
        self, batch: PreparedBatch, inserted: Sequence[InsertOutcome]
    ) -> builtins.list[ItemOutcome[Execution]]:
        """The second half: one outcome per request, in its order."""
        results = list(batch.results)
        _count_created(inserted)
        for index, item, one in zip(batch.places, batch.items, inserted, strict=True):
            try:
                execution = _same_or_conflict(item, one.execution)
            except Conflict as exc:
                results[index] = ItemOutcome(Outcome.CONFLICT, error=exc)
                continue
            outcome = Outcome.CREATED if one.created else Outcome.SAME
            results[index] = ItemOutcome(outcome, execution)
        return [r for r in results if r is not None]

    def settle_ids(
        self, batch: PreparedBatch, existing: Sequence[Execution | None]
    ) -> builtins.list[IdOutcome]:
        """``settle_many``'s outcomes as ``IdOutcome``, from what ``execution_insert_or_existing``
        found (None: inserted): the same outcome and error for each request
        (``tests/app/test_executions.py`` holds the two equal)."""
        sent = SentBatch(batch.results)
        sent.keep(batch.places, batch.items)
        return self.settle_sent(sent, existing)

    def settle_sent(
        self, sent: SentBatch, existing: Sequence[Execution | None]
    ) -> builtins.list[IdOutcome]:
        """``settle_ids`` of what a batch kept of its items (``SentBatch``)."""
        _count_new(sent.uris, existing)
        results: builtins.list[IdOutcome | None] = [
            None if r is None else IdOutcome(r.outcome, None, r.error) for r in sent.results
        ]
        created, same, new = Outcome.CREATED, Outcome.SAME, tuple.__new__
        for index, execution_id, fingerprint, key, holder in zip(
            sent.places, sent.ids, sent.fingerprints, sent.keys, existing, strict=True
        ):
            if holder is None:  # IdOutcome(created, ...), without the named tuple's __new__
                results[index] = new(IdOutcome, (created, execution_id, None))
                continue
            try:
                execution = _existing_or_conflict(execution_id, fingerprint, key, holder)
            except Conflict as exc:
                results[index] = IdOutcome(Outcome.CONFLICT, None, exc)
            else:
                results[index] = IdOutcome(same, execution.execution_id, None)
        return [r for r in results if r is not None]

    async def _prepare(self, request: SubmitRequest) -> NewExecution:
        """One submission's checked execution (``_prepare_many``'s steps for one item)."""
        now = self.clock.now()
        uri = request.definition_uri
        name = name_of(uri)  # read once: the check takes the URI as it is found
        check_request_shape(request, now, self.limits, uri, None if name is None else uri)
        assert name is not None  # the check refused any other
        version = request.definition_version
        definition = self._pinned_now(name, version)
        if definition is None:  # not cached, or its rate limit not yet made ready here
            definition = await self.pinned(name, version)
            if definition is None:
                raise self.no_definition(uri, version)
        trace = request.trace_context or current_context()
        return prepare_execution(request, definition, self.tenant, now, trace, uri)

    @staticmethod
    def no_definition(uri: str, version: int | None) -> InvalidInput:
        """The refusal of a request naming a definition that is not registered."""
        which = f"version {version} of {uri}" if version else uri
        return InvalidInput(
            f"no definition is registered as {which}",
            [FieldError("definitionUri", "no such definition (register it first)")],
        )

    def _pinned_now(self, name: str, version: int | None) -> Definition | None:
        """``pinned``'s definition when it needs nothing awaited (nearly always): cached, and
        its rate limit's bucket already made ready for this tenant; else None."""
        stored = self.cache.fresh((self.tenant, name, version))
        if stored is None:
            return None
        definition = stored.definition
        if self.store.rate_limit_synced(self.tenant, definition.uri, definition.version):
            return definition
        return None

    async def pinned(self, name: str, version: int | None) -> Definition | None:
        """The definition a request names (None when there is none), its rate limit's bucket
        made ready for this tenant."""
        stored = await self.cache.get(
            (self.tenant, name, version),
            lambda: self.store.definition_get(self.tenant, name, version),
        )
        if stored is None:
            return None
        definition = stored.definition
        # Its rate limit's bucket for this tenant, before its first execution can be READY
        # (once per process and definition version: the store remembers).
        await self.store.rate_limit_sync(
            self.tenant,
            definition.uri,
            definition.version,
            definition.rate_limit,
            store_now(self.clock),
        )
        return definition

    # -- read -----------------------------------------------------------------------------------

    async def get(self, execution_id: uuid.UUID) -> Execution:
        execution = await self.store.execution_get(self.tenant, execution_id)
        if execution is None:
            raise NotFound(f"no execution {execution_id}")
        return execution

    async def list(
        self, flt: ExecutionFilter, before: uuid.UUID | None, limit: int
    ) -> ExecutionSlice:
        """At most ``limit`` (1 to ``MAX_PAGE``) executions older than ``before``."""
        limit = max(1, min(limit, MAX_PAGE))
        # One row more than asked tells whether another page exists without a count query.
        rows = await self.store.execution_list(self.tenant, flt, before, limit + 1)
        return ExecutionSlice(rows[:limit], len(rows) > limit)

    async def attempts(self, execution_id: uuid.UUID) -> builtins.list[Attempt]:
        await self.get(execution_id)
        return await self.store.attempt_list(self.tenant, execution_id)

    async def output(self, execution_id: uuid.UUID) -> Output:
        execution = await self.get(execution_id)
        output = execution.output
        if execution.output_reference is not None:
            output = await self.store.execution_output_get(self.tenant, execution_id)
        return Output(output, execution.output_reference)

    async def history(self, execution_id: uuid.UUID) -> builtins.list[ExecutionEvent]:
        await self.get(execution_id)
        return await self.store.execution_event_list(self.tenant, execution_id)

    # -- change ---------------------------------------------------------------------------------

    async def cancel(self, execution_id: uuid.UUID) -> Execution:
        """Not started: CANCELLED now. RUNNING: a cancel request (``cancel_requested_at``) that
        its worker hears at its next heartbeat; it ends CANCELLED when the worker has stopped
        it (or earlier, if the attempt finished first). Finished: a Conflict."""
        for _ in range(3):  # the status may move between the two guarded writes; then again
            now = self.clock.now()
            cancelled = await self.store.execution_cancel(self.tenant, execution_id, now)
            if cancelled is not None:
                return cancelled
            requested = await self.store.execution_cancel_request(self.tenant, execution_id, now)
            if requested is not None:
                return requested
            # Neither guard matched: say whether it does not exist or why it cannot be cancelled.
            current = await self.get(execution_id)
            if current.status in TERMINAL:
                break
        raise Conflict(cancel_refusal(current.status), {"status": str(current.status)})

    async def replay(self, execution_id: uuid.UUID) -> Execution:
        """A finished execution runs again with the retry budget of its definition version as
        registered now (the execution's own when the definition is gone)."""
        current = await self.get(execution_id)
        stored = await self.store.definition_get(
            self.tenant, stored_name(current.definition_uri), current.definition_version
        )
        budget = stored.definition.retry.max_attempts if stored else current.max_attempts
        replayed = await self.store.execution_replay(
            self.tenant, execution_id, budget, self.clock.now()
        )
        if replayed is not None:
            return replayed
        current = await self.get(execution_id)
        raise Conflict(replay_refusal(current.status), {"status": str(current.status)})


def _same_or_conflict(item: NewExecution, existing: Execution) -> Execution:
    return _existing_or_conflict(
        item.execution_id, item.request_fingerprint, item.idempotency_key, existing
    )


def _existing_or_conflict(
    execution_id: uuid.UUID, fingerprint: str, key: str | None, existing: Execution
) -> Execution:
    """``existing`` when it is the item's (``execution_id``) or holds its key for the same
    request (``fingerprint``); else the Conflict of the key."""
    # The one created from this item holds its very id: the comparison of values not needed.
    if existing.execution_id is execution_id or existing.execution_id == execution_id:
        return existing
    if existing.request_fingerprint == fingerprint:
        return existing
    raise Conflict(
        f"Idempotency-Key {key!r} was already used for a different request "
        f"(execution {existing.execution_id}); use a new key for a new request",
        {"idempotencyKey": key, "executionId": str(existing.execution_id)},
    )


def _count_created(outcomes: Sequence[InsertOutcome]) -> None:
    """Counts what the store created: an idempotent repeat of a submission is not a new one.
    One increment per definition, not per execution: a batch is mostly of one definition."""
    created: dict[str, int] = {}
    for o in outcomes:
        if o.created:
            uri = o.execution.definition_uri
            created[uri] = created.get(uri, 0) + 1
    submitted = process_metrics().submitted
    for uri, count in created.items():
        _series(submitted, uri).inc(count)


def _count_new(uris: Sequence[str], existing: Sequence[Execution | None]) -> None:
    """``_count_created`` for ``execution_insert_or_existing`` (``uris``: each item's
    definition): an item is new when no execution held its key."""
    created: dict[str, int] = {}
    for uri, holder in zip(uris, existing, strict=True):
        if holder is None:
            created[uri] = created.get(uri, 0) + 1
    submitted = process_metrics().submitted
    for uri, count in created.items():
        _series(submitted, uri).inc(count)


@lru_cache(maxsize=1024)
def _series(counter: Counter, uri: str) -> Counter:
    """The counter's series for a definition: ``labels`` takes a lock and builds its key on every
    call, a tenth of a single submission's own CPU. Kept per counter (a test's metrics are new
    ones) and bounded like the definitions a process sees."""
    return counter.labels(definition_label(uri))
