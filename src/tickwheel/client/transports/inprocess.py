"""The in-process transport: the Execution API's rules applied straight to a Store. The API
routes, the all-in-one server and services such as the Cron Service all go through it, so
every path into the store obeys the same validation and idempotency rules."""

from __future__ import annotations

import builtins
import uuid
from collections import Counter
from collections.abc import Sequence

from tickwheel.client.transport import Wire
from tickwheel.client.transports.definition_cache import definition_cache
from tickwheel.client.wire import (
    attempt_to_wire,
    decode_cursor,
    definition_to_wire,
    encode_cursor,
    event_to_wire,
    execution_to_wire,
)
from tickwheel.domain.clock import Clock, SystemClock
from tickwheel.domain.definition_files import parse_definition
from tickwheel.domain.definition_refs import require_name, stored_name
from tickwheel.domain.definitions import (
    Definition,
    content_hash,
    diff_definitions,
)
from tickwheel.domain.errors import (
    Conflict,
    FieldError,
    Forbidden,
    InvalidInput,
    NotFound,
    TickwheelError,
)
from tickwheel.domain.models import Execution, ExecutionFilter
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.domain.states import cancel_refusal, replay_refusal
from tickwheel.domain.submission import (
    NewExecution,
    SubmitLimits,
    SubmitRequest,
    check_request_shape,
    prepare_execution,
)
from tickwheel.observability.metrics import definition_label, process_metrics
from tickwheel.store.protocol import SHARED, InsertOutcome, Store, StoredDefinition

MAX_PAGE = 500


class InProcessTransport:
    def __init__(
        self,
        store: Store,
        tenant: str,
        clock: Clock | None = None,
        limits: SubmitLimits | None = None,
        run_policy: RunPolicy | None = None,
    ) -> None:
        self.store = store
        self.tenant = tenant
        self.clock = clock or SystemClock()
        self.limits = limits or SubmitLimits()
        # Registration refuses what no worker under this policy would run (docs/worker_policy.md).
        self.run_policy = run_policy
        self.definitions = definition_cache(store)

    async def close(self) -> None:
        """The store belongs to whoever opened it; nothing to release here."""

    # -- definitions ----------------------------------------------------------------------------

    async def definition_apply(
        self, body: bytes, fmt: str, shared: bool = False
    ) -> tuple[Wire, bool]:
        """Registers into this tenant's definitions, or with ``shared`` into the shared registry
        (the caller checked the operator scope: this transport trusts whoever built it)."""
        stored, created = await self.apply_definition(
            parse_definition(body, fmt, policy=self.run_policy), shared
        )
        return definition_to_wire(stored), created

    async def apply_definition(
        self, definition: Definition, shared: bool = False
    ) -> tuple[StoredDefinition, bool]:
        """Stores a definition once; identical content again is a no-op, other content under
        the same version a conflict naming the fields that differ. A tenant may not take a name
        of the shared registry: its submissions, pinned to that name's versions, would change
        owner under them."""
        owner = SHARED if shared else self.tenant
        if owner == SHARED and not shared:
            raise Forbidden("a tenant needs a name: '' is the shared registry's owner")
        candidate = StoredDefinition(
            definition, content_hash(definition), self.clock.now(), owner=owner
        )
        if await self.store.definition_insert(candidate):
            # A submit here right after this apply must see it (unpinned: as the latest).
            self.definitions.forget(definition.name)
            return candidate, True
        existing = await self.store.definition_get(owner, definition.name, definition.version)
        if existing is None or existing.owner != owner:
            raise Conflict(
                f"{definition.name} is a shared definition; choose another name (a tenant may "
                "not register a name of the shared registry: only the operator publishes "
                "its versions)",
                {"name": definition.name, "owner": "shared"},
            )
        if existing.content_hash == candidate.content_hash:
            return existing, False
        fields = diff_definitions(existing.definition, definition)
        raise Conflict(
            f"definition {definition.name} version {definition.version} already exists with "
            f"different content (fields that differ: {', '.join(fields)}); definitions are "
            "immutable: register the change as a new version",
            {"name": definition.name, "version": definition.version, "differingFields": fields},
        )

    async def definition_list(self) -> builtins.list[Wire]:
        """This tenant's definitions and the shared ones it resolves, never another tenant's."""
        return [definition_to_wire(d) for d in await self.store.definition_list(self.tenant)]

    async def definition_versions(self, name: str) -> builtins.list[Wire]:
        versions = await self.store.definition_versions(self.tenant, name)
        if not versions:
            raise NotFound(f"no definition named {name!r}")
        return [definition_to_wire(d) for d in versions]

    async def definition_get(self, name: str, version: int) -> Wire:
        stored = await self.store.definition_get(self.tenant, name, version)
        if stored is None:
            raise NotFound(f"definition {name!r} has no version {version}")
        return definition_to_wire(stored)

    # -- executions -----------------------------------------------------------------------------

    async def submit(self, request: SubmitRequest) -> tuple[Wire, bool]:
        item = await self._prepare(request, {})
        [outcome] = await self.store.execution_insert_many([item])
        _count_created([outcome])
        return execution_to_wire(self._same_or_conflict(item, outcome.execution)), outcome.created

    async def submit_many(self, requests: Sequence[SubmitRequest]) -> builtins.list[Wire]:
        """One transaction for every valid item; invalid items get their own error result and
        do not stop the others."""
        results: builtins.list[Wire | None] = [None] * len(requests)
        valid: list[tuple[int, NewExecution]] = []
        cache: dict[tuple[str, int | None], Definition] = {}
        for index, request in enumerate(requests):
            try:
                valid.append((index, await self._prepare(request, cache)))
            except TickwheelError as exc:
                results[index] = _item_error(422, exc)
        outcomes = await self.store.execution_insert_many([item for _, item in valid])
        _count_created(outcomes)
        for (index, item), outcome in zip(valid, outcomes, strict=True):
            try:
                execution = self._same_or_conflict(item, outcome.execution)
            except Conflict as exc:
                results[index] = _item_error(409, exc)
                continue
            status = 201 if outcome.created else 200
            results[index] = {"status": status, "execution": execution_to_wire(execution)}
        return [r for r in results if r is not None]

    async def _prepare(
        self, request: SubmitRequest, cache: dict[tuple[str, int | None], Definition]
    ) -> NewExecution:
        now = self.clock.now()
        check_request_shape(request, now, self.limits)
        name = require_name(request.definition_uri)
        assert name is not None  # checked above
        version = request.definition_version
        definition = cache.get((name, version))
        if definition is None:
            stored = await self.definitions.get(
                (self.tenant, name, version),
                lambda: self.store.definition_get(self.tenant, name, version),
            )
            if stored is None:
                which = (
                    f"version {version} of {request.definition_uri}"
                    if version
                    else request.definition_uri
                )
                raise InvalidInput(
                    f"no definition is registered as {which}",
                    [FieldError("definitionUri", "no such definition (register it first)")],
                )
            definition = cache[(name, version)] = stored.definition
        return prepare_execution(request, definition, self.tenant, now)

    @staticmethod
    def _same_or_conflict(item: NewExecution, existing: Execution) -> Execution:
        if existing.execution_id == item.execution_id:
            return existing
        if existing.request_fingerprint == item.request_fingerprint:
            return existing
        raise Conflict(
            f"Idempotency-Key {item.idempotency_key!r} was already used for a different request "
            f"(execution {existing.execution_id}); use a new key for a new request",
            {"idempotencyKey": item.idempotency_key, "executionId": str(existing.execution_id)},
        )

    async def _get(self, execution_id: uuid.UUID) -> Execution:
        execution = await self.store.execution_get(self.tenant, execution_id)
        if execution is None:
            raise NotFound(f"no execution {execution_id}")
        return execution

    async def get(self, execution_id: uuid.UUID) -> Wire:
        return execution_to_wire(await self._get(execution_id))

    async def list(self, flt: ExecutionFilter, cursor: str | None, limit: int) -> Wire:
        limit = max(1, min(limit, MAX_PAGE))
        before = decode_cursor(cursor) if cursor else None
        # One row more than asked tells whether another page exists without a count query.
        rows = await self.store.execution_list(self.tenant, flt, before, limit + 1)
        page = rows[:limit]
        more = len(rows) > limit
        return {
            "items": [execution_to_wire(e) for e in page],
            "nextCursor": encode_cursor(page[-1].execution_id) if more and page else None,
        }

    async def attempts(self, execution_id: uuid.UUID) -> builtins.list[Wire]:
        await self._get(execution_id)
        return [
            attempt_to_wire(a) for a in await self.store.attempt_list(self.tenant, execution_id)
        ]

    async def output(self, execution_id: uuid.UUID) -> Wire:
        execution = await self._get(execution_id)
        output = execution.output
        if execution.output_reference is not None:
            output = await self.store.execution_output_get(self.tenant, execution_id)
        return {"output": output, "outputReference": execution.output_reference}

    async def history(self, execution_id: uuid.UUID) -> builtins.list[Wire]:
        await self._get(execution_id)
        events = await self.store.execution_event_list(self.tenant, execution_id)
        return [event_to_wire(ev) for ev in events]

    async def cancel(self, execution_id: uuid.UUID) -> Wire:
        cancelled = await self.store.execution_cancel(self.tenant, execution_id, self.clock.now())
        if cancelled is not None:
            return execution_to_wire(cancelled)
        # The guard did not match: say whether it does not exist or why it cannot be cancelled.
        current = await self._get(execution_id)
        raise Conflict(cancel_refusal(current.status), {"status": str(current.status)})

    async def replay(self, execution_id: uuid.UUID) -> Wire:
        current = await self._get(execution_id)
        stored = await self.store.definition_get(
            self.tenant, stored_name(current.definition_uri), current.definition_version
        )
        budget = stored.definition.retry.max_attempts if stored else current.max_attempts
        replayed = await self.store.execution_replay(
            self.tenant, execution_id, budget, self.clock.now()
        )
        if replayed is not None:
            return execution_to_wire(replayed)
        current = await self._get(execution_id)
        raise Conflict(replay_refusal(current.status), {"status": str(current.status)})


def _item_error(status: int, exc: TickwheelError) -> Wire:
    return {
        "status": status,
        "error": {"code": exc.code, "message": exc.message, "details": exc.details},
    }


def _count_created(outcomes: Sequence[InsertOutcome]) -> None:
    """Counts what the store created: an idempotent repeat of a submission is not a new one.
    One increment per definition, not per execution: a batch is mostly of one definition."""
    created = Counter(o.execution.definition_uri for o in outcomes if o.created)
    submitted = process_metrics().submitted
    for uri, count in created.items():
        submitted.labels(definition_label(uri)).inc(count)
