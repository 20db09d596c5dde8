"""Rows of the PostgreSQL store to domain objects and back.

psycopg already maps the native types (uuid, timestamptz, jsonb); what is left is the enums,
instants normalised to UTC whatever the session's TimeZone, and batches as parallel arrays."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any

from psycopg.types.json import Jsonb, set_json_loads

from tickwheel.domain.concurrency import Concurrency, Order
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
from tickwheel.store.execution_columns import EXECUTION, NEW_EXECUTION, Kind, column, converters
from tickwheel.store.protocol import InsertOutcome, StoredDefinition

Row = dict[str, Any]

# Every json/jsonb column read, by every connection made after this import: a row stored before
# the API checked values (nested 900 deep, say) must not break each read of it (issue 12).
set_json_loads(lambda text: {} if text == b"{}" else load_readable(text))
# (An empty object, the inputs of most executions, is readable as it is: no walk over it.)


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


def _iso(value: datetime) -> str:
    return require_aware(value).isoformat()


# The conversions of each column kind (store/execution_columns.py); any other is taken as is.
_INSERT = converters(
    NEW_EXECUTION,
    {
        Kind.ID: str,
        Kind.INSTANT: _iso,
        Kind.OPTIONAL_INSTANT: lambda v: _iso(v) if v is not None else None,
        Kind.STATUS: str,
    },
)
_INSERT_NAMES = attrgetter(*(name for name, _ in _INSERT))
_INSERT_CONVERTED = tuple((i, c) for i, (_, c) in enumerate(_INSERT) if c is not None)


def insert_items(items: Sequence[NewExecution]) -> str:
    """The ``items`` parameter of ``execution_insert``: one JSON array per item, positional in
    ``NewExecution``'s field order (the statement's), instants with their offset."""
    rows = []
    for item in items:
        row = list(_INSERT_NAMES(item))
        for index, convert in _INSERT_CONVERTED:
            row[index] = convert(row[index])
        if (group := item.concurrency) is not None:  # SPREAD: left off when there is none
            row += (group.key, group.limit, group.order)
        rows.append(row)
    return _COMPACT.encode(rows)


def _as_utc(value: datetime) -> datetime:
    return value if value.tzinfo is UTC else value.astimezone(UTC)


_FROM_NEW = converters(
    NEW_EXECUTION,
    {Kind.INSTANT: _as_utc, Kind.OPTIONAL_INSTANT: lambda v: _as_utc(v) if v is not None else None},
)


def execution_from_new(item: NewExecution) -> Execution:
    """The row ``execution_insert`` wrote for ``item``: its values as given, instants in UTC as
    the database returns them, and the columns' starting values."""
    values = {n: getattr(item, n) if c is None else c(getattr(item, n)) for n, c in _FROM_NEW}
    created = values["created_at"]
    ready = created if item.status is ExecutionStatus.READY else None
    return Execution(
        **values,
        attempt_count=0,
        updated_at=created,
        ready_at=ready,
        concurrency=item.concurrency,
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


_FROM_ROW = tuple(
    (name, column(name), convert)
    for name, convert in converters(
        EXECUTION,
        {
            Kind.INSTANT: utc,
            Kind.OPTIONAL_INSTANT: opt_utc,
            Kind.STATUS: ExecutionStatus,
            Kind.OBJECT: readable_object,
        },
    )
)
"""Each field of an ``Execution`` with its column and conversion: the reference decoding, which
``execution_from_row`` is generated from and tested against."""

# The expression that reads one field from row ``r``, by the field's kind; any other kind is
# taken as it is. Same conversions as ``_FROM_ROW``.
_EXPRESSIONS = {
    Kind.INSTANT: "r[{column!r}].astimezone(UTC)",
    Kind.OPTIONAL_INSTANT: "None if (v := r[{column!r}]) is None else v.astimezone(UTC)",
    Kind.STATUS: "_status(r[{column!r}])",
    Kind.OBJECT: "readable_object(r[{column!r}])",
}
_STATUSES = ExecutionStatus._value2member_map_


def _status(value: str) -> ExecutionStatus:
    return _STATUSES.get(value) or ExecutionStatus(value)  # type: ignore[return-value]


def _execution_decoder() -> Callable[[Row], Execution]:
    """``execution_from_row``, written out for the fields of ``Execution``.

    Whole rows (a get, a list, every statement that returns them); a claim's rows are narrower
    and have their own decoder (claimed_rows.py). A worker once decoded every row it claimed
    here, and the generic decoding (a loop over the fields, then the frozen dataclass's
    ``__init__``, which sets each of its 33 fields through ``object.__setattr__``) cost about
    20 µs a row: more than the rest of a no-op attempt's bookkeeping. Written out, with the
    instance's ``__dict__`` filled in one step, it is about 5.
    That is exactly what the dataclass's own ``__init__`` leaves behind, as long as ``Execution``
    keeps a ``__dict__`` and has no ``__post_init__`` (checked here, once)."""
    if hasattr(Execution, "__post_init__") or hasattr(Execution, "__slots__"):
        raise TypeError("Execution gained a __post_init__ or __slots__: decode it through __init__")
    fields = [name for name, _ in EXECUTION]
    if sorted([*fields, "concurrency"]) != sorted(f.name for f in dataclasses.fields(Execution)):
        raise TypeError("the decoded fields are not Execution's")
    items = "".join(
        f"        {name!r}: "
        + _EXPRESSIONS.get(kind, "r[{column!r}]").format(column=column(name))
        + ",\n"
        for name, kind in EXECUTION
    )
    source = (
        "def execution_from_row(r):\n"
        "    execution = new(Execution)\n"
        "    execution.__dict__.update({\n"
        f"{items}"
        "        'concurrency': concurrency_of(r),\n"
        "    })\n"
        "    return execution\n"
    )
    scope: dict[str, Any] = {
        "Execution": Execution,
        "UTC": UTC,
        "concurrency_of": concurrency_of,
        "new": object.__new__,
        "readable_object": readable_object,
        "_status": _status,
    }
    exec(source, scope)  # the source is made above, from the dataclass's own fields
    decoder: Callable[[Row], Execution] = scope["execution_from_row"]
    decoder.__doc__ = "An ``Execution`` from its row: psycopg reads uuids and JSON itself."
    return decoder


def execution_from_row_reference(r: Row) -> Execution:
    """The plain decoding, field by field through ``Execution``'s ``__init__`` (tests hold
    ``execution_from_row`` to it)."""
    return Execution(
        **{n: r[col] if c is None else c(r[col]) for n, col, c in _FROM_ROW},
        concurrency=concurrency_of(r),
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


def concurrency_of(r: Row) -> Concurrency | None:
    """The execution's concurrency group, from its three columns (NULL: no limit)."""
    if r["concurrency_limit"] is None:
        return None
    order: Order = "none" if r["concurrency_order"] == "none" else "fifo"
    return Concurrency(r["concurrency_key"] or "", r["concurrency_limit"], order)


execution_from_row = _execution_decoder()
