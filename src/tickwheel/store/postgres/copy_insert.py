"""A large batch of new executions by binary COPY (``execution_copy``) instead of the one-statement
``execution_insert``, with the same outcome per item.

Why: per row, ``execution_insert`` made the server parse the item's JSON and cast its instants
from text, arbitrate ``ON CONFLICT`` against both unique indexes before inserting, and sort; a
third of its CPU per row, the rest being the row and its index entries (docs/scaling.md,
"The batch insert's server time"). COPY in binary format sends each value in its stored form.

What stays exact:

- **Idempotency.** COPY has no ``ON CONFLICT``, so the keys already taken are read first (one
  index probe each, ``execution_get_by_key``), and only the others are copied: an item whose key
  is taken gets the execution that holds it (``created=False``), as from the statement. A key
  taken by another submission between that read and the COPY fails the COPY (a unique
  violation, after waiting for the other transaction like ``ON CONFLICT`` does; on a partitioned
  table the key trigger skips the row instead, and fewer rows than sent are copied): the
  transaction is rolled back, nothing of the batch is stored, and it goes by ``execution_insert``
  as a whole. So the server logs an error only when two submissions of one key race (or for a
  value it refuses, below).
- **Duplicates inside the batch.** The first item of a key is copied; the later ones get its
  execution with ``created=False`` (the statement inserted the earliest among them and read it
  back for the others).
- **Lock order.** Rows are copied in ``lock_order``, the order every insert path uses, so two
  batches sharing keys wait on each other in one order and cannot deadlock.
- **Wake-ups.** The NOTIFYs for the statuses copied are sent inside the transaction (delivered
  at its commit, never for rows rolled back), and this process's waiters signalled after it.
- **Hostile input.** The items were checked before they got here. A value refused on the way
  (by psycopg, or by the server: a NUL, NaN in JSON, a CHECK) fails the COPY and rolls back its
  transaction, and the batch goes by the statement, which refuses it as before (the same error,
  nothing stored). A number too large for its column is sent to the statement without trying:
  psycopg would write its low bits.

Below ``COPY_FROM`` items the statement stays cheaper: this way costs six or seven round trips
(the read of the keys, BEGIN, the COPY's two, the NOTIFYs, COMMIT) where the statement costs
one."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from psycopg import errors
from psycopg.types.json import set_json_dumps
from psycopg_pool import AsyncConnectionPool

from tickwheel.domain.models import Execution
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import NewExecution
from tickwheel.store.due import hint_pairs
from tickwheel.store.execution_columns import NEW_EXECUTION, Kind, column
from tickwheel.store.postgres.notify import Signals, topics_for
from tickwheel.store.postgres.pool import Conn
from tickwheel.store.postgres.rows import (
    execution_from_new,
    execution_from_row,
    json_text,
    key_pairs,
    lock_order,
)
from tickwheel.store.protocol import InsertOutcome
from tickwheel.store.sqlfile import load_queries

Q = load_queries("tickwheel.store.postgres.sql")

COPY_FROM = 200
"""Batches of at least this many items go by COPY. Measured per item, three interleaved pairs
each on the loaded 2-core machine (statement / COPY, client CPU + the backend's CPU): 100 items
55 / 56 µs, 300 items 48 / 44 µs, 1,000 items 48 / 38 µs. The COPY's round trips cost the
client about 0.8 ms a batch more there; the server's CPU per row is lower from 100 on."""

_KIND_TYPES = {
    Kind.ID: "uuid",
    Kind.INSTANT: "timestamptz",
    Kind.OPTIONAL_INSTANT: "timestamptz",
    Kind.STATUS: "text",
    Kind.OBJECT: "jsonb",
    Kind.JSON: "jsonb",
}
_PLAIN_TYPES = {
    "tenant": "text",
    "definition_uri": "text",
    "definition_version": "int4",
    "shard_id": "int2",
    "idempotency_key": "text",
    "request_fingerprint": "text",
    "priority": "int4",
    "max_attempts": "int4",
}
"""The columns of plain text and numbers (a new one must be added here: a KeyError at import)."""


COPY_COLUMNS = (
    *(column(name) for name, _ in NEW_EXECUTION),
    "concurrency_key",
    "concurrency_limit",
    "concurrency_order",
    "attempt_count",
    "ready_at",
    "updated_at",
)
"""``execution_copy``'s columns in their order (a test holds the statement to it)."""
COPY_TYPES = (
    *(_KIND_TYPES.get(kind) or _PLAIN_TYPES[name] for name, kind in NEW_EXECUTION),
    "text",
    "int4",
    "text",
    "int4",
    "timestamptz",
    "timestamptz",
)
"""Each column's type for the binary format (a test holds them to the table's)."""

Pair = tuple[str, str]
"""(tenant, idempotency key)."""
_NEW_VALUES = attrgetter(*(name for name, _ in NEW_EXECUTION))
_NO_GROUP = (None, None, None)
_READY = ExecutionStatus.READY


def copy_row(item: NewExecution) -> tuple[Any, ...]:
    """``item`` as a row of ``COPY_COLUMNS``: its fields as they are (psycopg writes each in its
    column's binary form), no limit as three NULLs, and what ``execution_insert`` fills: no
    attempt yet, ``readyAt`` the creation for a READY item, ``updatedAt`` the creation."""
    created = item.created_at
    group = item.concurrency
    spread = _NO_GROUP if group is None else (group.key, group.limit, group.order)
    ready = created if item.status is _READY else None
    return (*_NEW_VALUES(item), *spread, 0, ready, created)


_BOUNDS = {"int2": (-(2**15), 2**15 - 1), "int4": (-(2**31), 2**31 - 1)}
_NUMBERS = tuple(
    (attrgetter(name), *_BOUNDS[_PLAIN_TYPES[name]])
    for name, kind in NEW_EXECUTION
    if kind is Kind.PLAIN and _PLAIN_TYPES[name] in _BOUNDS
)


def _numbers_fit(items: Sequence[NewExecution]) -> bool:
    """Whether every number of the batch is an int that fits its column. psycopg writes an int4
    or int2 of the binary format from the low bits of a larger int, where the statement's cast
    refuses it: a batch with one that does not fit goes by the statement, which refuses it as
    before. (Values of other wrong types are refused by psycopg or the server: see below.)"""
    columns = [[*map(get, items), low, high] for get, low, high in _NUMBERS]
    limits = [c.limit for i in items if (c := i.concurrency) is not None]
    columns.append([*limits, *_BOUNDS["int4"]])
    for values in columns:
        low, high = values[-2:]
        if set(map(type, values)) != {int} or min(values) < low or max(values) > high:
            return False
    return True


_REFUSED = (errors.IntegrityError, errors.DataError, TypeError, ValueError, AttributeError)
"""How a value can be refused on the way (a unique violation, a NUL in a text, a CHECK, a value
psycopg cannot write in its column's type), besides ``_Skipped``: the transaction is rolled back
and the batch goes by the statement, which stores it or refuses it exactly as before."""


class _Skipped(Exception):
    """Fewer rows copied than sent: a key trigger skipped one (a key taken in between)."""


async def insert_by_copy(
    pool: AsyncConnectionPool[Conn], signals: Signals, items: Sequence[NewExecution]
) -> list[InsertOutcome] | None:
    """Each item's outcome, as ``execution_insert`` would give it, or None when a key was taken
    while this ran (nothing of the batch stored: the caller inserts it by the statement)."""
    if not _numbers_fit(items):
        return None
    keyed = any(i.idempotency_key is not None for i in items)
    async with pool.connection() as conn:
        taken = await _taken(conn, items) if keyed else {}
        fresh: list[NewExecution] = []
        firsts: dict[Pair, NewExecution] = {}
        for item in items:
            if (key := item.idempotency_key) is not None:
                pair = (item.tenant, key)
                if pair in taken or pair in firsts:
                    continue
                firsts[pair] = item
            fresh.append(item)
        if fresh:
            statuses = {i.status for i in fresh}
            topics = topics_for(statuses)
            due = hint_pairs(fresh) if ExecutionStatus.SCHEDULED in statuses else []
            try:
                async with conn.transaction():
                    cursor = conn.cursor()
                    set_json_dumps(json_text, cursor)  # this cursor's jsonb columns
                    async with cursor.copy(Q["execution_copy"]) as copy:
                        copy.set_types(COPY_TYPES)
                        for item in sorted(fresh, key=lock_order):
                            await copy.write_row(copy_row(item))
                    if cursor.rowcount != len(fresh):
                        raise _Skipped
                    await signals.notify(conn, topics, due)
            except (*_REFUSED, _Skipped):
                return None
            signals.signal(topics, due)
    made = {id(i): execution_from_new(i) for i in fresh}  # by identity: a UUID hashes in Python
    outcomes = []
    for item in items:
        if (key := item.idempotency_key) is None:
            outcomes.append(InsertOutcome(made[id(item)], created=True))
        elif (theirs := taken.get((item.tenant, key))) is not None:
            outcomes.append(InsertOutcome(theirs, created=False))
        else:
            first = firsts[(item.tenant, key)]
            outcomes.append(InsertOutcome(made[id(first)], created=first is item))
    return outcomes


async def _taken(conn: Conn, items: Sequence[NewExecution]) -> dict[Pair, Execution]:
    """The executions that already hold the key of any of ``items``, by their (tenant, key)."""
    cursor = await conn.execute(Q["execution_get_by_key"], {"pairs": key_pairs(items)})
    found = [execution_from_row(r) for r in await cursor.fetchall()]
    return {(e.tenant, e.idempotency_key): e for e in found if e.idempotency_key is not None}
