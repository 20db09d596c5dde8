"""Rows of the SQLite store to domain objects and back (times as integer microseconds)."""

from __future__ import annotations

import json
import sqlite3
import uuid
from datetime import datetime
from typing import Any

from tickwheel.domain.concurrency import Concurrency, Order
from tickwheel.domain.definitions import definition_from_document
from tickwheel.domain.models import ApiKey, Attempt, Execution, Scope
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.domain.submission import NewExecution
from tickwheel.store.protocol import StoredDefinition
from tickwheel.store.sqlite.codec import from_us, jload, jload_object, to_us


def insert_params(item: NewExecution) -> dict[str, Any]:
    return {
        "execution_id": str(item.execution_id),
        "tenant": item.tenant,
        "definition_uri": item.definition_uri,
        "definition_version": item.definition_version,
        "input_snapshot": json.dumps(item.inputs),
        "execute_at": to_us(item.execute_at),
        "bucket_start": to_us(item.bucket_start),
        "shard_id": item.shard_id,
        "idempotency_key": item.idempotency_key,
        "request_fingerprint": item.request_fingerprint,
        "status": str(item.status),
        "priority": item.priority,
        "max_attempts": item.max_attempts,
        "ready_at": to_us(item.created_at) if item.status is ExecutionStatus.READY else None,
        "created_at": to_us(item.created_at),
        "trace_context": json.dumps(item.trace_context) if item.trace_context else None,
        "concurrency_key": item.concurrency.key if item.concurrency else None,
        "concurrency_limit": item.concurrency.limit if item.concurrency else None,
        "concurrency_order": item.concurrency.order if item.concurrency else None,
    }


def definition_row(row: sqlite3.Row) -> StoredDefinition:
    return StoredDefinition(
        definition=definition_from_document(json.loads(row["document"])),
        content_hash=row["content_hash"],
        created_at=from_us(row["created_at"]),
        owner=row["owner"],
    )


def execution_row(r: sqlite3.Row) -> Execution:
    return Execution(
        execution_id=uuid.UUID(r["execution_id"]),
        tenant=r["tenant"],
        definition_uri=r["definition_uri"],
        definition_version=r["definition_version"],
        inputs=jload_object(r["input_snapshot"]),
        execute_at=from_us(r["execute_at"]),
        status=ExecutionStatus(r["status"]),
        priority=r["priority"],
        attempt_count=r["attempt_count"],
        max_attempts=r["max_attempts"],
        shard_id=r["shard_id"],
        bucket_start=from_us(r["bucket_start"]),
        created_at=from_us(r["created_at"]),
        updated_at=from_us(r["updated_at"]),
        idempotency_key=r["idempotency_key"],
        request_fingerprint=r["request_fingerprint"],
        next_attempt_at=_opt_time(r["next_attempt_at"]),
        ready_at=_opt_time(r["ready_at"]),
        lease_owner=r["lease_owner"],
        lease_expires_at=_opt_time(r["lease_expires_at"]),
        fencing_token=r["fencing_token"],
        output=jload(r["output"]),
        output_reference=r["output_reference"],
        error=jload(r["error"]),
        started_at=_opt_time(r["started_at"]),
        finished_at=_opt_time(r["finished_at"]),
        cancel_requested_at=_opt_time(r["cancel_requested_at"]),
        progress=jload(r["progress"]),
        checkpoint=jload(r["checkpoint"]),
        trace_context=jload(r["trace_context"]),
        concurrency=concurrency_of(r),
    )


def attempt_row(r: sqlite3.Row) -> Attempt:
    return Attempt(
        execution_id=uuid.UUID(r["execution_id"]),
        attempt_number=r["attempt_number"],
        worker_id=r["worker_id"],
        fencing_token=r["fencing_token"],
        status=AttemptStatus(r["status"]),
        started_at=from_us(r["started_at"]),
        finished_at=_opt_time(r["finished_at"]),
        error=jload(r["error"]),
    )


def api_key_row(r: sqlite3.Row) -> ApiKey:
    return ApiKey(
        key_id=r["key_id"],
        tenant=r["tenant"],
        scope=Scope(r["scope"]),
        name=r["name"],
        created_at=from_us(r["created_at"]),
        revoked_at=_opt_time(r["revoked_at"]),
    )


def _opt_time(value: int | None) -> datetime | None:
    return from_us(value) if value is not None else None


def concurrency_of(r: sqlite3.Row) -> Concurrency | None:
    """The execution's concurrency group, from its three columns (NULL: no limit)."""
    if r["concurrency_limit"] is None:
        return None
    order: Order = "none" if r["concurrency_order"] == "none" else "fifo"
    return Concurrency(r["concurrency_key"] or "", r["concurrency_limit"], order)
