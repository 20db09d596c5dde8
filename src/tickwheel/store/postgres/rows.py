"""Rows of the PostgreSQL store to domain objects and back.

psycopg already maps the native types (uuid, timestamptz, jsonb); what is left is the enums,
instants normalised to UTC whatever the session's TimeZone, and batches as parallel arrays."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg.types.json import Jsonb, set_json_loads

from tickwheel.domain.definitions import definition_from_document
from tickwheel.domain.jsonvalues import load_readable, readable_object
from tickwheel.domain.models import (
    ApiKey,
    Attempt,
    Execution,
    ExecutionEvent,
    ExecutionEventKind,
    Scope,
)
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.domain.submission import NewExecution
from tickwheel.store.protocol import InsertOutcome, StoredDefinition

Row = dict[str, Any]

# Every json/jsonb column read, by every connection made after this import: a row stored before
# the API checked values (nested 900 deep, say) must not break each read of it (issue 12).
set_json_loads(load_readable)


def utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def opt_utc(value: datetime | None) -> datetime | None:
    return value.astimezone(UTC) if value is not None else None


def jsonb(value: Any) -> Jsonb | None:
    """SQL NULL for None (as on SQLite), JSON otherwise."""
    return Jsonb(value) if value is not None else None


def require_aware(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("naive datetimes are not stored: attach a timezone")
    return value


def like_prefix(prefix: str | None) -> str | None:
    """A LIKE pattern matching ``prefix`` literally at the start (``\\`` is the escape)."""
    if prefix is None:
        return None
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


def opt_aware(value: datetime | None) -> datetime | None:
    return require_aware(value) if value is not None else None


_COMPACT = json.JSONEncoder(separators=(",", ":"))
"""``json.dumps(..., separators=(",", ":"))`` without building an encoder per call."""


def insert_items(items: Sequence[NewExecution]) -> str:
    """The ``items`` parameter of ``execution_insert``: one JSON array per item, positional
    (execution_id, tenant, definition_uri, definition_version, inputs, execute_at,
    bucket_start, shard_id, idempotency_key, request_fingerprint, status, priority,
    max_attempts, created_at, trace_context), instants with their offset. A batch's items
    share their instants (submitted at one ``now``, most due then): each is written once."""
    written: dict[datetime, str] = {}

    def instant(value: datetime) -> str:
        # Keyed by equality: an equal instant written with another offset is the same
        # timestamptz. A naive datetime never equals an aware one, so it is refused here.
        text = written.get(value)
        if text is None:
            text = written[value] = require_aware(value).isoformat()
        return text

    return _COMPACT.encode(
        [
            [
                str(i.execution_id), i.tenant, i.definition_uri, i.definition_version, i.inputs,
                instant(i.execute_at), instant(i.bucket_start),
                i.shard_id, i.idempotency_key, i.request_fingerprint, i.status.value, i.priority,
                i.max_attempts, instant(i.created_at), i.trace_context,
            ]
            for i in items
        ]
    )  # fmt: skip


def _as_utc(value: datetime) -> datetime:
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def execution_from_new(item: NewExecution) -> Execution:
    """The row ``execution_insert`` wrote for ``item``: its values as given, instants in UTC as
    the database returns them, and the columns' starting values."""
    utc = _as_utc
    created = utc(item.created_at)
    return Execution(
        execution_id=item.execution_id,
        tenant=item.tenant,
        definition_uri=item.definition_uri,
        definition_version=item.definition_version,
        inputs=item.inputs,
        execute_at=utc(item.execute_at),
        status=item.status,
        priority=item.priority,
        attempt_count=0,
        max_attempts=item.max_attempts,
        shard_id=item.shard_id,
        bucket_start=utc(item.bucket_start),
        created_at=created,
        updated_at=created,
        idempotency_key=item.idempotency_key,
        request_fingerprint=item.request_fingerprint,
        ready_at=created if item.status is ExecutionStatus.READY else None,
        trace_context=item.trace_context,
    )


def insert_outcomes(
    items: Sequence[NewExecution], inserted: Sequence[Execution], existing: Sequence[Execution]
) -> list[InsertOutcome]:
    """Each item's outcome, in order: the execution it created, or else the one that already
    held its (tenant, idempotency key)."""
    created = {e.execution_id: e for e in inserted}
    by_key = {(e.tenant, e.idempotency_key): e for e in existing}
    outcomes: list[InsertOutcome] = []
    for item in items:
        if (mine := created.get(item.execution_id)) is not None:
            outcomes.append(InsertOutcome(mine, created=True))
        elif (theirs := by_key.get((item.tenant, item.idempotency_key))) is not None:
            outcomes.append(InsertOutcome(theirs, created=False))
        else:  # pragma: no cover - the constraint guarantees a row
            raise RuntimeError("insert conflicted but no execution holds the key")
    return outcomes


def definition_from_row(row: Row) -> StoredDefinition:
    return StoredDefinition(
        definition=definition_from_document(row["document"]),
        content_hash=row["content_hash"],
        created_at=utc(row["created_at"]),
        owner=row["owner"],
    )


def execution_from_row(r: Row) -> Execution:
    return Execution(
        execution_id=r["execution_id"],
        tenant=r["tenant"],
        definition_uri=r["definition_uri"],
        definition_version=r["definition_version"],
        inputs=readable_object(r["input_snapshot"]),
        execute_at=utc(r["execute_at"]),
        status=ExecutionStatus(r["status"]),
        priority=r["priority"],
        attempt_count=r["attempt_count"],
        max_attempts=r["max_attempts"],
        shard_id=r["shard_id"],
        bucket_start=utc(r["bucket_start"]),
        created_at=utc(r["created_at"]),
        updated_at=utc(r["updated_at"]),
        idempotency_key=r["idempotency_key"],
        request_fingerprint=r["request_fingerprint"],
        next_attempt_at=opt_utc(r["next_attempt_at"]),
        ready_at=opt_utc(r["ready_at"]),
        lease_owner=r["lease_owner"],
        lease_expires_at=opt_utc(r["lease_expires_at"]),
        fencing_token=r["fencing_token"],
        output=r["output"],
        output_reference=r["output_reference"],
        error=r["error"],
        started_at=opt_utc(r["started_at"]),
        finished_at=opt_utc(r["finished_at"]),
        cancel_requested_at=opt_utc(r["cancel_requested_at"]),
        progress=r["progress"],
        checkpoint=r["checkpoint"],
        trace_context=r["trace_context"],
    )


def attempt_from_row(r: Row) -> Attempt:
    return Attempt(
        execution_id=r["execution_id"],
        attempt_number=r["attempt_number"],
        worker_id=r["worker_id"],
        fencing_token=r["fencing_token"],
        status=AttemptStatus(r["status"]),
        started_at=utc(r["started_at"]),
        finished_at=opt_utc(r["finished_at"]),
        error=r["error"],
    )


def event_from_row(r: Row) -> ExecutionEvent:
    return ExecutionEvent(
        execution_id=r["execution_id"],
        kind=ExecutionEventKind(r["kind"]),
        at=utc(r["at"]),
        detail=r["detail"],
    )


def api_key_from_row(r: Row) -> ApiKey:
    return ApiKey(
        key_id=r["key_id"],
        tenant=r["tenant"],
        scope=Scope(r["scope"]),
        name=r["name"],
        created_at=utc(r["created_at"]),
        revoked_at=opt_utc(r["revoked_at"]),
    )
