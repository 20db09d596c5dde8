"""A batch's insert sent a chunk at a time in one transaction, while its caller makes the next.

The one-statement insert (``execution_insert``) made the submitting process wait: it prepared
every item, sent them, then waited for the database, which had waited meanwhile. Here the
statements of the chunks go out on one connection in pipeline mode (each is sent as soon as its
chunk is made, none waits for an answer), inside one explicit transaction: the database inserts
chunk k while the caller makes chunk k+1, and the COMMIT, sent after the last chunk, is what
makes any of them visible.

**The explicit transaction is required.** Without it the pipeline's statements are one implicit
transaction that the pipeline's Sync commits, and psycopg sends a Sync when the pipeline block
is left, also on an exception or a cancellation: the chunks already sent would be committed.
With it, a failure anywhere (a value the database refuses in any chunk, an exception in the
caller between two chunks, a cancellation) leaves no row behind: the ROLLBACK goes out instead
of the COMMIT, or the server has skipped the COMMIT with the rest of the failed transaction.

Lock order: each chunk is sorted as every insert path writes (``rows.lock_order``) and must
follow the previous one in that order (the caller sorts the whole batch before cutting it), so
the rows of the transaction are written in the one order that two batches sharing keys cannot
deadlock on, and among duplicates of a key, in different chunks or not, the earliest is
inserted. A chunk that would break the order is refused (ValueError) before it is sent.

Prepared at its first run on a connection (``prepare=True``), where psycopg's own threshold
would parse and plan a batch's first chunks anew (0.09 ms a chunk, warm). Its generic plan reads
no table itself: the insert's function does (tests/store/test_batch_insert_postgres.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterable, Sequence
from operator import attrgetter
from typing import Any

from psycopg import AsyncCursor
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool

from tickwheel.domain.models import Execution
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import NewExecution
from tickwheel.store.due import hint_pairs
from tickwheel.store.postgres.notify import Signals
from tickwheel.store.postgres.pool import Conn
from tickwheel.store.postgres.rows import in_lock_order, insert_items, insert_statement, lock_order


class ChunkedInsert:
    """What the chunks' statements did, once committed, and what is kept of the items sent (in
    the order sent) to answer for them: each one's id, tenant, key and status, and the
    SCHEDULED ones whole (their due hints); how many rows were inserted and, only when that is
    not every item, the rows (each one's id first); the items' statuses and whether any is
    SCHEDULED. No other item is kept once its chunk is sent: its caller drops it too, and the
    batch then keeps no object per item but its id (docs/scaling.md)."""

    __slots__ = (
        "due",
        "ids",
        "inserted",
        "keys",
        "rows",
        "scheduled",
        "statuses",
        "statuses_sent",
        "tenants",
    )

    def __init__(self) -> None:
        self.ids: list[uuid.UUID] = []
        self.tenants: list[str] = []
        self.keys: list[str | None] = []
        self.statuses_sent: list[ExecutionStatus] = []
        self.scheduled: list[NewExecution] = []
        self.inserted = 0
        self.rows: list[Any] = []
        self.statuses: set[ExecutionStatus] = set()
        self.due = False

    def keep(self, chunk: Sequence[NewExecution], statuses: set[ExecutionStatus]) -> None:
        self.ids.extend(map(_ID, chunk))
        self.tenants.extend(map(_TENANT, chunk))
        self.keys.extend(map(_KEY, chunk))
        self.statuses_sent.extend(map(_STATUS, chunk))
        if ExecutionStatus.SCHEDULED in statuses:
            self.scheduled += (i for i in chunk if i.status is ExecutionStatus.SCHEDULED)
        self.statuses |= statuses

    def inserted_of(
        self, created: set[uuid.UUID]
    ) -> tuple[set[ExecutionStatus], list[NewExecution]]:
        """The statuses of the items inserted (their ids ``created``), and their SCHEDULED ones."""
        statuses = {s for i, s in zip(self.ids, self.statuses_sent, strict=True) if i in created}
        return statuses, [i for i in self.scheduled if i.execution_id in created]

    def missing(self, created: set[uuid.UUID]) -> list[tuple[str, str | None]]:
        """The (tenant, key) of each item not inserted."""
        pairs = zip(self.ids, self.tenants, self.keys, strict=True)
        return [(tenant, key) for i, tenant, key in pairs if i not in created]

    def answer(self, created: set[uuid.UUID], holders: list[Execution]) -> list[Execution | None]:
        """Per item sent: None when inserted, else the execution among ``holders`` holding its
        (tenant, key)."""
        holding = {(e.tenant, e.idempotency_key): e for e in holders}
        pairs = zip(self.ids, self.tenants, self.keys, strict=True)
        return [None if i in created else holding[(tenant, key)] for i, tenant, key in pairs]


_ID = attrgetter("execution_id")
_TENANT = attrgetter("tenant")
_KEY = attrgetter("idempotency_key")
_STATUS = attrgetter("status")


async def insert_chunks(
    pool: AsyncConnectionPool[Conn],
    signals: Signals,
    chunks: AsyncIterable[Sequence[NewExecution]],
) -> ChunkedInsert:
    """Inserts the items of ``chunks`` (each made while the previous one's statement runs) in
    one transaction, committed when the last chunk's statement has been sent; nothing of it is
    signalled in this process here (the caller signals once it knows what was inserted)."""
    done = ChunkedInsert()
    cursors: list[AsyncCursor[Any]] = []
    last: tuple[str, str] | None = None
    async with pool.connection() as conn:
        async with conn.pipeline(), conn.transaction():
            async for chunk in chunks:
                if not chunk:
                    continue
                ordered = in_lock_order(chunk)
                if last is not None and lock_order(ordered[0]) < last:
                    raise ValueError("a chunk's keys must follow the previous chunk's")
                last = lock_order(ordered[-1])
                statuses = {i.status for i in chunk}
                due = hint_pairs(chunk) if ExecutionStatus.SCHEDULED in statuses else []
                params: dict[str, Any] = {
                    **insert_items(ordered),
                    "notify": signals.insert_notifications(statuses, due),
                }
                # Sent now, answered later: in pipeline mode execute() does not wait for its
                # result. One cursor per statement, each keeping its own result.
                cursor = conn.cursor(row_factory=tuple_row)
                await cursor.execute(insert_statement(params), params, prepare=True)
                cursors.append(cursor)
                done.keep(chunk, statuses)
                done.due = done.due or bool(due)
        # The pipeline has ended: every result is in (an error raised above, with nothing
        # committed: the server skips what follows a failed statement up to the Sync, COMMIT
        # included, and the transaction rolls back). A statement returns a row per item it
        # inserted: when they number the items, every item was inserted and the rows are not
        # read (a tuple and a UUID per item, kept until the batch is answered, were most of
        # what made the garbage collector walk the whole process).
        counts = [cursor.rowcount for cursor in cursors]
        if -1 in counts or sum(counts) != len(done.ids):
            for cursor in cursors:
                done.rows += await cursor.fetchall()
            done.inserted = len(done.rows)
        else:
            done.inserted = len(done.ids)
    return done
