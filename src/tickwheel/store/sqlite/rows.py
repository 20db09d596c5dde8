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
from tickwheel.store.execution_columns import EXECUTION, NEW_EXECUTION, Kind, column, converters
from tickwheel.store.protocol import StoredDefinition
from tickwheel.store.sqlite.codec import from_us, jload, jload_object, to_us


def _json(value: Any) -> str | None:
    return json.dumps(value) if value is not None else None


# The conversions of each column kind (store/execution_columns.py); any other is taken as is.
_INSERT = tuple(
    (name, column(name), convert)
    for name, convert in converters(
        NEW_EXECUTION,
        {
            Kind.ID: str,
            Kind.INSTANT: to_us,
            Kind.OPTIONAL_INSTANT: lambda v: to_us(v) if v is not None else None,
            Kind.STATUS: str,
            Kind.OBJECT: _json,
            Kind.JSON: _json,
        },
    )
)


def insert_params(item: NewExecution) -> dict[str, Any]:
    """Each field under its column's name (``:name`` in ``execution_insert``), and when the
    execution starts READY, the instant it became ready."""
    params = {col: getattr(item, n) if c is None else c(getattr(item, n)) for n, col, c in _INSERT}
    params["ready_at"] = params["created_at"] if item.status is ExecutionStatus.READY else None
    group = item.concurrency  # SPREAD over three columns
    params["concurrency_key"] = group.key if group else None
    params["concurrency_limit"] = group.limit if group else None
    params["concurrency_order"] = group.order if group else None
    return params


def definition_row(row: sqlite3.Row) -> StoredDefinition:
    return StoredDefinition(
        definition=definition_from_document(json.loads(row["document"])),
        content_hash=row["content_hash"],
        created_at=from_us(row["created_at"]),
        owner=row["owner"],
    )


_FROM_ROW = tuple(
    (name, column(name), convert)
    for name, convert in converters(
        EXECUTION,
        {
            Kind.ID: uuid.UUID,
            Kind.INSTANT: from_us,
            Kind.OPTIONAL_INSTANT: lambda v: from_us(v) if v is not None else None,
            Kind.STATUS: ExecutionStatus,
            Kind.OBJECT: jload_object,
            Kind.JSON: jload,
        },
    )
)


def execution_row(r: sqlite3.Row) -> Execution:
    """Each column by its field's kind (``store/execution_columns.py``)."""
    return Execution(
        **{n: r[col] if c is None else c(r[col]) for n, col, c in _FROM_ROW},
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
