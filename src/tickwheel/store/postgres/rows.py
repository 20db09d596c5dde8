"""Rows of the PostgreSQL store to domain objects and back.

psycopg already maps the native types (uuid, timestamptz, jsonb); what is left is the enums,
instants normalised to UTC whatever the session's TimeZone, and batches as parallel arrays."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from operator import itemgetter
from typing import Any

from psycopg.types.json import Jsonb, set_json_loads

from tickwheel.domain.concurrency import Concurrency, Order
from tickwheel.domain.definitions import definition_from_document
from tickwheel.domain.fast_init import fillable, filled
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
from tickwheel.store.sqlfile import load_queries, without_comment_lines

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


def lock_order(item: NewExecution) -> tuple[str, str]:
    """The order in which every insert path writes a batch's rows (a sort key): by tenant, then
    key, in code point order (Python's, whatever the database's collation). The unique index
    makes an insert wait for a competing uncommitted one of the same key; two batches that share
    keys and take them in one order cannot each hold a key the other waits for. Items without a
    key clash with nothing; they sort as the empty key. Used with ``sorted`` (stable), it keeps
    duplicates of a key in their batch order, so that the earliest is the one inserted."""
    return item.tenant, item.idempotency_key or ""


def in_lock_order(items: Sequence[NewExecution]) -> Sequence[NewExecution]:
    """``items`` as every insert path writes them (``lock_order``); one item as it is."""
    return items if len(items) < 2 else sorted(items, key=lock_order)


def key_pairs(items: Iterable[NewExecution]) -> str:
    """The ``pairs`` parameter of ``execution_get_by_key``: each item's (tenant, idempotency key)
    once, as a JSON array of arrays (items without a key left out)."""
    return pairs_text((i.tenant, i.idempotency_key) for i in items)


def pairs_text(pairs: Iterable[tuple[str, str | None]]) -> str:
    """``key_pairs`` of the items whose (tenant, idempotency key) are ``pairs``."""
    return _COMPACT.encode(list(dict.fromkeys(p for p in pairs if p[1] is not None)))


def insert_items(items: Sequence[NewExecution]) -> dict[str, str | None]:
    """The ``items`` and ``shared`` parameters of ``execution_insert``: one JSON array per item,
    positional in ``NewExecution``'s field order (the statement's), instants with their offset,
    and what every item of the batch has in common written once (``shared_columns``). For one
    item, ``execution_insert_one``'s parameters, one per column (``one_params``; the JSON row
    whole, for ``execution_insert``, when it cannot go so).

    The items of one batch share their instants (the batch's ``now`` is each one's creation
    and, unless it says otherwise, its ``executeAt``): each instant object is written once
    (kept by identity, so two equal instants with different offsets are still each written as
    given; every item is alive until the end, so no identity is reused meanwhile)."""
    if len(items) == 1:  # execution_insert_one: a text parameter per column
        params = one_params(items[0])
        if params is not None:
            return params
    return _shared(_columns(items), len(items))


def _columns(items: Sequence[NewExecution]) -> list[list[Any]]:
    """The rows of ``items`` (the fields in ``NewExecution``'s order, the concurrency group's three
    columns last), made a column at a time: most columns of a batch
    hold one value (its instant, tenant, definition, status ...), converted once here, and the
    shared ones are found by the column as ``shared_columns`` finds them."""
    states = [item.__dict__ for item in items]
    count = len(states)
    written: dict[int, str] = {}  # the instants written so far, by identity
    columns: list[list[Any]] = []
    for name, kind in NEW_EXECUTION:
        values = list(map(itemgetter(name), states))
        if kind is Kind.ID:
            values = [_id_text(v) for v in values]
        elif kind is Kind.INSTANT or kind is Kind.OPTIONAL_INSTANT:
            first = values[0]
            if len(set(map(id, values))) == 1:  # one object: written once
                values = [None if first is None else _iso(first)] * count
            else:
                values = [None if v is None else _instant_text(v, written) for v in values]
        columns.append(values)
    groups = [state["concurrency"] for state in states]
    if groups.count(None) == count:
        columns += ([None] * count, [None] * count, [None] * count)
    else:
        columns.append([None if g is None else g.key for g in groups])
        columns.append([None if g is None else g.limit for g in groups])
        columns.append([None if g is None else g.order for g in groups])
    return columns


def _instant_text(value: datetime, written: dict[int, str]) -> str:
    text = written.get(id(value))
    if text is None:
        text = written[id(value)] = _iso(value)
    return text


def _id_text(value: uuid.UUID) -> str:
    """An id as a batch's JSON row writes it: its 32 hex digits (what ``uuid`` reads, without
    ``str``'s dashes, a tenth of the cost)."""
    return "%032x" % value.int  # noqa: UP031 (faster than format or an f-string here)


def one_params(item: NewExecution) -> dict[str, str | None] | None:
    """``execution_insert_one``'s parameters for ``item``: each column's value as the text the
    statement casts (what ``_columns`` writes into the JSON row, the JSON values as JSON); None
    when a text value could not be sent as a libpq text parameter as it is (a NUL would cut it
    short, a lone surrogate has no UTF-8): such an item takes the JSON statement, whose answer
    (the server's refusal) stays what it was.

    Every single submission makes these, so what is most often the same as the last
    submission's is not made again: the bucket's text (a minute's submissions share their
    bucket, ``submission._bucket_of``), the creation's text up to its second
    (``_instant_now_text``), an empty object's JSON, a status's text. The id is written as its
    32 hex digits, which ``uuid`` reads as it reads the dashed form."""
    group = item.concurrency
    tenant, uri, key = item.tenant, item.definition_uri, item.idempotency_key
    fingerprint = item.request_fingerprint
    if not (
        _sendable(tenant)
        and _sendable(uri)
        and (key is None or _sendable(key))
        and _sendable(fingerprint)
        and (group is None or (_sendable(group.key) and _sendable(group.order)))
    ):
        return None
    trace, inputs = item.trace_context, item.inputs
    start_by, deadline = item.start_by, item.deadline
    # Due now, its executeAt is its creation's instant (the same object): written once.
    created, at = _instant_now_text(item.created_at), item.execute_at
    return {
        "execution_id": "%032x" % item.execution_id.int,  # noqa: UP031 (as _id_text)
        "tenant": tenant,
        "definition_uri": uri,
        "definition_version": str(item.definition_version),
        "inputs": "{}" if type(inputs) is dict and not inputs else _COMPACT.encode(inputs),
        "execute_at": created if at is item.created_at else _iso(at),
        "bucket_start": _bucket_text(item.bucket_start),
        "shard_id": str(item.shard_id),
        "idempotency_key": key,
        "request_fingerprint": fingerprint,
        "status": _STATUS_TEXT.get(item.status) or str(item.status),
        "priority": str(item.priority),
        "max_attempts": str(item.max_attempts),
        "created_at": created,
        "trace_context": None if trace is None else _COMPACT.encode(trace),
        "start_by": None if start_by is None else _iso(start_by),
        "deadline": None if deadline is None else _iso(deadline),
        "concurrency_key": None if group is None else group.key,
        "concurrency_limit": None if group is None else str(group.limit),
        "concurrency_order": None if group is None else group.order,
    }


_STATUS_TEXT: dict[object, str] = {status: str(status) for status in ExecutionStatus}
_SECOND = timedelta(seconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_last_second: tuple[datetime, datetime, str] = (_EPOCH, _EPOCH, "")


def _instant_now_text(value: datetime) -> str:
    """``_iso(value)``. A single submission's creation is an instant in UTC (the clock's now),
    and the submissions of one second share its text up to the second: kept, with the second
    it is of, and completed with the microseconds as ``isoformat`` writes them (none when
    there are none). ``isoformat`` formats each of its numbers through C's ``sprintf``: about
    11,500 instructions, against 5,000 here (a fortieth of a single submission's)."""
    global _last_second
    if value.tzinfo is not UTC:
        return _iso(value)
    start, end, head = _last_second
    if not start <= value < end:
        start = value.replace(microsecond=0)
        head = start.isoformat().removesuffix("+00:00")
        _last_second = (start, start + _SECOND, head)
    micro = value.microsecond
    return f"{head}.{micro:06d}+00:00" if micro else head + "+00:00"


_last_bucket: tuple[datetime | None, str] = (None, "")


def _bucket_text(bucket: datetime) -> str:
    """``_iso(bucket)``, the last one kept: a bucket is a minute, the same object for the
    submissions of that minute (``submission._bucket_of``). By identity, so an equal instant
    with another offset is still written as given; the object kept stays alive, so its
    identity is not reused meanwhile."""
    global _last_bucket
    last = _last_bucket
    if last[0] is bucket:
        return last[1]
    text = _iso(bucket)
    _last_bucket = (bucket, text)
    return text


def _sendable(text: str) -> bool:
    """Whether ``text`` goes as a text parameter unchanged: no NUL, valid UTF-8 (ASCII, the
    common case, is known without encoding)."""
    if "\x00" in text:
        return False
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


_QUERIES = load_queries("tickwheel.store.postgres.sql")
INSERT = without_comment_lines(_QUERIES["execution_insert"])
"""The batch insert as sent: without its comment lines it stays under psycopg's 4 kB query
cache (a statement over it has its ``%(name)s`` placeholders converted at every call)."""
INSERT_ONE = without_comment_lines(_QUERIES["execution_insert_one"])


def insert_statement(params: Mapping[str, Any]) -> str:
    """The statement for ``insert_items``'s parameters, as sent: a single item's own, or the
    JSON rows' (a batch's, and a single item that ``one_params`` sends as JSON)."""
    return INSERT if "items" in params else INSERT_ONE


def shared_columns(rows: list[list[Any]]) -> dict[str, str | None]:
    """``rows`` (of equal length) as ``execution_insert``'s two parameters: ``shared``, the
    value of each column that is the same in every row (``null`` for the others), and ``items``,
    the rows with those columns written ``null`` and the trailing ones left off. The statement
    casts a shared value once per batch instead of once per row (a submission's tenant,
    definition, instants, status, limits and most often its inputs and fingerprint are its
    batch's): 4.8 of 24.8 µs of the database's CPU per row, measured. A column whose rows are
    all NULL is shared as NULL: the same either way."""
    return _shared(list(zip(*rows, strict=True)), len(rows))


def _alike(values: Sequence[Any], first: Any) -> bool:
    """Whether ``values``, all ``==`` to ``first``, are also the same JSON: Python holds
    ``1 == 1.0 == True`` (and so ``{"n": 1} == {"n": True}``), which JSON and the stored row do
    not. None, a string and an empty container equal only their like; anything else is compared
    as the JSON it is written as."""
    kind = type(first)
    if first is None or kind is str or ((kind is dict or kind is list) and not first):
        return True
    if kind is int or kind is bool:  # equal and of one type: the same JSON (a batch's numbers)
        return list(map(type, values)).count(kind) == len(values)
    text = _COMPACT.encode(first)
    return all(v is first or _COMPACT.encode(v) == text for v in values)


def _shared(columns: list[Any], count: int) -> dict[str, str | None]:
    """``shared_columns`` of the rows whose columns are ``columns`` (``count`` rows)."""
    shared: list[Any] = [None] * len(columns)
    nulls = (None,) * count
    varying = 0
    for index, values in enumerate(columns):
        first = values[0]
        if count > 1 and values.count(first) == count and _alike(values, first):
            shared[index] = first
            columns[index] = nulls
        else:
            varying = index + 1
    # At least one column, so that there is a row per item (the same item twice: all shared).
    kept = columns[: max(varying, 1)]
    return {
        "items": _COMPACT.encode(list(zip(*kept, strict=True))),
        "shared": _COMPACT.encode(shared),
    }


def insert_items_reference(items: Sequence[NewExecution]) -> dict[str, str | None]:
    """``insert_items`` field by field through the column kinds' conversions (tests hold the two
    equal)."""
    if len(items) == 1 and (params := _one_params_reference(items[0])) is not None:
        return params
    rows = []
    for item in items:
        row = [
            getattr(item, name) if convert is None else convert(getattr(item, name))
            for name, convert in _INSERT
        ]
        group = item.concurrency
        if group is not None:
            row += [group.key, group.limit, group.order]
        else:
            row += [None] * 3
        rows.append(row)
    return shared_columns(rows)


def _one_params_reference(item: NewExecution) -> dict[str, str | None] | None:
    """``one_params`` through the column kinds: each field's text (JSON for the JSON kinds)."""
    group = item.concurrency
    params: dict[str, str | None] = {}
    for name, kind in NEW_EXECUTION:
        value = getattr(item, name)
        if value is None:
            params[name] = None
        elif kind in (Kind.JSON, Kind.OBJECT):
            params[name] = _COMPACT.encode(value)
        elif kind in (Kind.INSTANT, Kind.OPTIONAL_INSTANT):
            params[name] = _iso(value)
        elif kind is Kind.ID:
            params[name] = _id_text(value)
        else:
            params[name] = str(value)
    params["concurrency_key"] = group.key if group else None
    params["concurrency_limit"] = str(group.limit) if group else None
    params["concurrency_order"] = group.order if group else None
    texts = [v for n, v in params.items() if n not in ("inputs", "trace_context")]
    for text in texts:
        if text is None:
            continue
        try:
            text.encode()
        except UnicodeEncodeError:
            return None
        if "\x00" in text:
            return None
    return params


# The conversions of each column kind (store/execution_columns.py); any other is taken as is.
_INSERT = converters(
    NEW_EXECUTION,
    {
        Kind.ID: _id_text,
        Kind.INSTANT: _iso,
        Kind.OPTIONAL_INSTANT: lambda v: _iso(v) if v is not None else None,
        Kind.STATUS: str,
    },
)


def _as_utc(value: datetime) -> datetime:
    return value if value.tzinfo is UTC else value.astimezone(UTC)


_FROM_NEW = converters(
    NEW_EXECUTION,
    {Kind.INSTANT: _as_utc, Kind.OPTIONAL_INSTANT: lambda v: _as_utc(v) if v is not None else None},
)


def _new_execution_template() -> dict[str, Any]:
    """The ``__dict__`` of an Execution just inserted, but for what its item gives: every field's
    default, and the starting values of those an item does not have. ``execution_from_new``
    fills a copy, as ``execution_from_row`` does, and for the same reason (the frozen
    dataclass's ``__init__`` sets its 33 fields one ``object.__setattr__`` at a time): checked
    here, once, that this is what ``__init__`` would leave."""
    for cls in (Execution, NewExecution):
        if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
            raise TypeError(f"{cls.__name__} gained a __post_init__ or __slots__")
    fields = {f.name: f for f in dataclasses.fields(Execution)}
    if any(f.default_factory is not dataclasses.MISSING for f in fields.values()):
        raise TypeError("an Execution field has a default factory: copy it per instance")
    new = [f.name for f in dataclasses.fields(NewExecution)]
    if not set(new) <= set(fields):
        raise TypeError("a NewExecution field is not one of Execution's")
    template = {n: f.default for n, f in fields.items() if f.default is not dataclasses.MISSING}
    template["attempt_count"] = 0
    required = {n for n, f in fields.items() if f.default is dataclasses.MISSING}
    if required - set(new) - {"attempt_count", "updated_at"}:
        raise TypeError("an Execution field without a default is not given by its item")
    return template


_NEW_TEMPLATE = _new_execution_template()
_NEW_INSTANTS = tuple(n for n, k in NEW_EXECUTION if k in (Kind.INSTANT, Kind.OPTIONAL_INSTANT))
_READY = ExecutionStatus.READY


def execution_from_new(item: NewExecution) -> Execution:
    """The row ``execution_insert`` wrote for ``item``: its values as given, instants in UTC as
    the database returns them, and the columns' starting values (``execution_from_new_reference``
    through ``Execution``'s ``__init__``; tests hold the two equal)."""
    values = _NEW_TEMPLATE.copy()  # a copy of a dictionary's table, then its values set
    values.update(item.__dict__)
    for name in _NEW_INSTANTS:
        value = values[name]
        if value is not None and value.tzinfo is not UTC:
            values[name] = value.astimezone(UTC)
    created = values["created_at"]
    values["updated_at"] = created
    values["ready_at"] = created if item.status is _READY else None
    return filled(Execution, values)


def execution_from_new_reference(item: NewExecution) -> Execution:
    """The plain making of ``execution_from_new``'s Execution, field by field."""
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
    fillable(Execution)
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
