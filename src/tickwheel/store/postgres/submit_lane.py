"""One pooled connection kept for single submissions: the insert of one execution runs there as
a prepared statement sent through libpq directly, not through psycopg's cursor.

Why: a submission awaited after the previous one (the SDK in process, the Cron Service, the API's
single route) is one statement, and psycopg's async execute around it cost the client about as
much CPU as all of tickwheel's own Python for it: the pool's checkout and return (its lock, the
check, the reset), the cursor, the query's conversion and prepared-statement bookkeeping, and an
``add_reader``/``remove_reader`` pair with a timer for every wait (two ``epoll_ctl`` calls). Here
the socket stays registered with the event loop while the lane holds the connection, so a round
trip is a send, one wait on a future and a read (docs/scaling.md, "The submit lane").

What stays the same: the statement (``execution_insert_one``, as the pool runs it, with the same
parameters), autocommit (one statement, one commit), and the pool's rules for a lost database
(``Pool.lost``: the pool is marked down and the caller gets ``Unavailable``; a session that no
longer takes writes is dropped). A statement's own error is raised as psycopg raises it.

The lane never makes a submission wait: when it is busy (another submission in flight), has no
connection and the pool has none idle, or its session said something unasked (the server ends a
session by writing to it first), the caller runs the statement through the pool as before. Nor
does it make anyone else wait: the connection it holds goes back to the pool as soon as a caller
finds none idle there (``Pool.keeper``), after the pool's ``max_lifetime``, when it looks
suspect, and at ``close``.

Two duties come with watching the socket itself:

- **The watch ends with the socket.** libpq closes the socket as soon as it reads the end of the
  stream (a backend that exited without a word), inside ``consume_input``. The reader is removed
  there and then: left registered, the event loop keeps the closed descriptor's entry, and a
  socket opened meanwhile under the same number (a new connection, an accepted HTTP client) would
  be "registered" without the kernel ever being told, so its reads would never be seen; and the
  lane's later ``remove_reader`` would take away that socket's own registration.
- **No wait without an end.** A backend that neither answers nor closes its socket (an orphan of
  a dead postmaster stuck on a lock, a stalled network) would keep a submission waiting for ever,
  where psycopg's path has the same weakness but the lane has its own wait. After ``ANSWER_WAIT``
  without a result the submission gets ``Unavailable`` (503, retry: the idempotency key makes the
  retry safe whether or not the statement committed), the server is asked to cancel it, and the
  connection is closed. One timer per lane watches every round trip (re-armed only when it fires
  during a later one), not a timer per statement."""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
import weakref
from collections.abc import Awaitable, Callable, Mapping
from time import monotonic
from typing import Any, TypeVar

import psycopg
from psycopg import errors, pq

from tickwheel.domain.errors import Unavailable
from tickwheel.domain.ids import uuid_of
from tickwheel.store.postgres.pool import Conn, Pool, connection_lost

STATEMENT = b"tickwheel_submit_lane"
"""The prepared statement's name on a connection the lane used (psycopg's own are ``_pg3_*``)."""
NOTIFY = (
    b"SELECT pg_notify(signal.channel, signal.payload)"
    b" FROM jsonb_to_recordset($1::jsonb) AS signal (channel text, payload text, status text)"
)
"""``notify``'s statement: ``execution_insert``'s NOTIFYs, without the insert."""
CANCEL_WAIT = 5.0
"""Seconds given to the server's cancel of a statement whose wait was cancelled (psycopg's)."""
ANSWER_WAIT = 10.0
"""Seconds a round trip may wait for the server's answer before the submission is answered
``Unavailable``: far above a single insert's time (milliseconds) and its lock waits in practice,
and below an HTTP client's usual timeout, so the client hears a 503 it can retry."""
T = TypeVar("T")
A = TypeVar("A")
_PLACEHOLDER = re.compile(r"%\((\w+)\)s")
_UNKNOWN_STATEMENT = "26000"  # invalid_sql_statement_name: not prepared on this session (any more)
_ALREADY_PREPARED = "42P05"  # duplicate_prepared_statement


def positional(query: str) -> tuple[bytes, tuple[str, ...]]:
    """``query`` with psycopg's ``%(name)s`` placeholders as libpq's ``$n``, and the names in
    their order (a name used twice is one parameter). Any other ``%`` is refused: psycopg would
    read it as an escape or a placeholder that this conversion does not know."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    converted = _PLACEHOLDER.sub(number, query)
    if "%" in converted:
        raise ValueError("the lane's statement may hold no % but %(name)s placeholders")
    return converted.encode(), tuple(names)


class SubmitLane:
    """Runs ``query`` (psycopg placeholders, text parameters, rows returned as text) on a
    connection it keeps from ``pool``. One statement at a time; see the module's docstring."""

    def __init__(
        self,
        pool: Pool,
        query: str,
        row: Callable[[pq.abc.PGresult, int], Any],
        *,
        answer_wait: float | None = None,
    ) -> None:
        """``row``: one returned row (the result, its index) as the caller's value;
        ``answer_wait``: ``ANSWER_WAIT`` unless given."""
        self._pool = pool
        self._answer_wait = ANSWER_WAIT if answer_wait is None else answer_wait
        self._sql, self._names = positional(query)
        self._row = row
        self._conn: Conn | None = None
        self._fd = -1
        self._taken_at = 0.0
        self._busy = False
        self._suspect = False
        self._waiter: asyncio.Future[None] | None = None
        self._watching = False  # the socket is registered with the pool's loop
        self._since = 0.0  # loop time the round trip in flight began (0.0: none)
        self._watchdog: asyncio.Handle | None = None
        self._prepared: weakref.WeakSet[Conn] = weakref.WeakSet()
        pool.keeper = self.give_back

    async def run(self, params: Mapping[str, str | None]) -> list[Any] | None:
        """The statement's rows, or None when the lane cannot take it now (the caller then runs
        it through the pool). Raises what the pool's path raises: ``Unavailable`` for a lost
        database, psycopg's error for a statement the server refused."""
        result = await self._on_lane(self._execute, self._values(params))
        return None if result is None else [self._row(result, i) for i in range(result.ntuples)]

    async def count(self, params: Mapping[str, str | None]) -> int | None:
        """``run``, answering how many rows the statement returned rather than the rows: a
        single insert asks no more (none is decoded)."""
        result = await self._on_lane(self._execute, self._values(params))
        return None if result is None else result.ntuples

    def _values(self, params: Mapping[str, str | None]) -> list[bytes | None]:
        return [None if (v := params[n]) is None else v.encode() for n in self._names]

    async def notify(self, notifications: str) -> bool:
        """Sends ``notifications`` (a ``notify`` parameter of ``execution_insert``: a JSON list
        of {channel, payload, status}) alone, in a transaction of its own: the wake-up owed for
        submissions that ran without theirs (``submit_lanes.py``). False: the lane cannot take
        it now (as ``run``'s None)."""
        sent = await self._on_lane(self._notify, notifications.encode())
        return sent is not None

    async def _on_lane(self, use: Callable[[Conn, A], Awaitable[T]], arg: A) -> T | None:
        """``use`` of the lane's connection (and ``arg``), or None when the lane cannot take a
        statement now."""
        if self._busy or asyncio.get_running_loop() is not self._pool.loop:
            # Another loop (a blocking Client's thread): the socket is watched by the pool's.
            return None
        self._busy = True
        try:
            conn = self._conn
            if conn is None or not self._sound(conn):
                conn = await self._connection()
                if conn is None:
                    return None
            try:
                return await use(conn, arg)
            except BaseException as exc:
                await self._failed(conn, exc)
                raise
        finally:
            self._busy = False

    @property
    def busy(self) -> bool:
        """Running a submission now."""
        return self._busy

    @property
    def keeps_idle(self) -> bool:
        """Holding a connection it is not running a submission on."""
        return self._conn is not None and not self._busy

    async def give_back(self) -> None:
        """The pool has no idle connection for a caller: the lane's goes back to it unless a
        submission is running on it (the lane takes one again when one is idle)."""
        # Only from the loop that watches its socket (a blocking Client's thread has its own).
        if (
            self._conn is not None
            and not self._busy
            and asyncio.get_running_loop() is self._pool.loop
        ):
            await self._release()

    async def close(self) -> None:
        """Gives its connection back to the pool (before the pool closes)."""
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if self._conn is not None:
            await self._release()

    # -- the connection ---------------------------------------------------------------------

    def _sound(self, conn: Conn) -> bool:
        """Whether the kept ``conn`` may run the next statement: nothing unasked heard on it,
        not broken, within the pool's lifetime and idle (checked before each use, without a
        coroutine: nearly every submission finds it so)."""
        return not (
            self._suspect
            or conn.broken
            or monotonic() - self._taken_at > self._pool.max_lifetime
            or conn.pgconn.transaction_status != pq.TransactionStatus.IDLE
        )

    async def _connection(self) -> Conn | None:
        conn = self._conn
        if conn is not None and not self._sound(conn):
            # Back to the pool, whose own check and lifetime rules then decide about it; this
            # submission goes through the pool.
            await self._release()
            return None
        if conn is None:
            conn = await self._pool.lend_idle()
            if conn is None:
                return None
            self._take(conn)
        return conn

    def _take(self, conn: Conn) -> None:
        self._conn = conn
        self._fd = conn.pgconn.socket
        self._taken_at = monotonic()
        self._suspect = False
        asyncio.get_running_loop().add_reader(self._fd, self._readable)
        self._watching = True

    async def _release(self, *, close: bool = False) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        self._unwatch()
        try:
            if close:
                await conn.close()
        finally:
            await self._pool.putconn(conn)

    def _readable(self) -> None:
        """The socket has something to read. During a statement: read it here, and wake the
        statement only once a whole result is in (so the loop is not asked again for an answer
        already read). Otherwise nothing was asked: a server that ends the session (shutdown,
        a terminated backend) says so first; the lane stops listening (level-triggered, it would
        be called at every turn of the loop) and gives the connection back at its next use, to
        the pool's check."""
        conn = self._conn
        if conn is None:
            return
        if not self._busy:
            self._suspect = True
            self._unwatch()
            return
        waiter = self._waiter
        try:
            conn.pgconn.consume_input()
        except psycopg.OperationalError as exc:
            # libpq has closed the socket (the module's docstring): its number is free now.
            self._unwatch()
            if waiter is not None and not waiter.done():
                waiter.set_exception(exc)
            return
        if waiter is not None and not waiter.done() and not conn.pgconn.is_busy():
            waiter.set_result(None)

    def _unwatch(self) -> None:
        """Stops watching the socket, once: its number may belong to another socket later."""
        if not self._watching:
            return
        self._watching = False
        loop = self._pool.loop  # the one watching the socket (``run`` is used from no other)
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is running and loop is not None:
            loop.remove_reader(self._fd)
        elif loop is not None and not loop.is_closed():  # closed from another loop's thread
            loop.call_soon_threadsafe(loop.remove_reader, self._fd)

    def _watch_answer(self) -> None:
        """The watchdog's turn: fails the round trip in flight once it has waited
        ``answer_wait``, else waits for the end of the one in flight now (if any)."""
        self._watchdog = None
        if not self._since:
            return
        loop = asyncio.get_running_loop()
        due = self._since + self._answer_wait
        if loop.time() < due:
            self._watchdog = loop.call_at(due, self._watch_answer)
            return
        waiter = self._waiter
        if waiter is None or waiter.done():  # between two waits of the round trip: next turn
            self._watchdog = loop.call_soon(self._watch_answer)
            return
        waiter.set_exception(NoAnswer(f"no answer from the database in {self._answer_wait} s"))

    async def _failed(self, conn: Conn, exc: BaseException) -> None:
        """After ``exc`` on the lane's connection: a statement's own error leaves the session
        idle and the lane keeps it; anything else (a lost session, a cancelled wait with a
        statement in flight, a bug) gives it back closed, and a lost database is the pool's
        ``Unavailable``, as on its own path."""
        if (
            isinstance(exc, psycopg.Error)
            and not connection_lost(exc, conn)
            and conn.pgconn.transaction_status == pq.TransactionStatus.IDLE
        ):
            return
        if isinstance(exc, NoAnswer):
            # The server may answer neither a cancel: it is asked in the background while the
            # caller hears its 503 now; the connection is closed once that is done.
            self._conn = None
            self._unwatch()
            task = asyncio.get_running_loop().create_task(self._cancel_and_drop(conn))
            _background.add(task)
            task.add_done_callback(_background.discard)
            raise Unavailable("the database did not answer in time; retry shortly") from exc
        lost = isinstance(exc, psycopg.Error) and connection_lost(exc, conn)
        if not lost and conn.pgconn.transaction_status == pq.TransactionStatus.ACTIVE:
            # The wait was cancelled with the statement running: the server is asked to stop
            # it, as psycopg does when one of its own waits is cancelled.
            with contextlib.suppress(psycopg.Error):
                await conn.cancel_safe(timeout=CANCEL_WAIT)
        unavailable = await self._pool.lost(exc, conn) if lost else None  # type: ignore[arg-type]
        await self._release(close=True)
        if unavailable is not None:
            raise unavailable from exc

    async def _cancel_and_drop(self, conn: Conn) -> None:
        """Asks the server to cancel what ``conn`` runs, then closes it and returns it to the
        pool (which discards a closed connection)."""
        try:
            with contextlib.suppress(psycopg.Error):
                await conn.cancel_safe(timeout=CANCEL_WAIT)
        finally:
            try:
                await conn.close()
            finally:
                await self._pool.putconn(conn)

    # -- the statement ----------------------------------------------------------------------

    async def _execute(self, conn: Conn, values: list[bytes | None]) -> pq.abc.PGresult:
        """The statement's result (its rows still in it)."""
        pgconn = conn.pgconn
        if conn not in self._prepared:
            await self._prepare(conn)
        result = await self._roundtrip(
            pgconn, lambda: pgconn.send_query_prepared(STATEMENT, values)
        )
        if result.status != pq.ExecStatus.TUPLES_OK:
            exc = errors.error_from_result(result, encoding=conn.info.encoding)
            if exc.sqlstate != _UNKNOWN_STATEMENT:
                raise exc
            # Deallocated meanwhile (psycopg sends DEALLOCATE ALL after some statements): it
            # ran nothing, so it is prepared again and sent once more.
            self._prepared.discard(conn)
            await self._prepare(conn)
            result = await self._roundtrip(
                pgconn, lambda: pgconn.send_query_prepared(STATEMENT, values)
            )
            if result.status != pq.ExecStatus.TUPLES_OK:
                raise errors.error_from_result(result, encoding=conn.info.encoding)
        return result

    async def _notify(self, conn: Conn, notifications: bytes) -> bool:
        pgconn = conn.pgconn
        result = await self._roundtrip(
            pgconn, lambda: pgconn.send_query_params(NOTIFY, [notifications])
        )
        if result.status != pq.ExecStatus.TUPLES_OK:
            raise errors.error_from_result(result, encoding=conn.info.encoding)
        return True

    async def _prepare(self, conn: Conn) -> None:
        pgconn = conn.pgconn
        result = await self._roundtrip(pgconn, lambda: pgconn.send_prepare(STATEMENT, self._sql))
        if result.status != pq.ExecStatus.COMMAND_OK:
            exc = errors.error_from_result(result, encoding=conn.info.encoding)
            if exc.sqlstate != _ALREADY_PREPARED:
                raise exc
        self._prepared.add(conn)

    async def _roundtrip(self, pgconn: pq.abc.PGconn, send: Callable[[], None]) -> pq.abc.PGresult:
        """Sends one command and reads its results: the first error's, else the last one's.
        The input is read by ``_readable``; this waits until libpq has a whole result. Run on
        the pool's loop only (``_on_lane``), the one watching the socket."""
        loop = self._pool.loop
        assert loop is not None  # opened
        self._since = loop.time()
        if self._watchdog is None:
            self._watchdog = loop.call_at(self._since + self._answer_wait, self._watch_answer)
        try:
            send()
            while pgconn.flush():  # 1: the rest waits for room in the socket's buffer
                await self._wait_writable(pgconn.socket)
            kept: pq.abc.PGresult | None = None
            while True:
                if pgconn.is_busy():
                    waiter = self._waiter = loop.create_future()
                    try:
                        await waiter
                    finally:
                        self._waiter = None
                    continue
                result = pgconn.get_result()
                if result is None:
                    if kept is None:  # pragma: no cover - libpq gives one result at least
                        raise psycopg.InterfaceError("the server sent no result")
                    return kept
                if kept is None or kept.status != pq.ExecStatus.FATAL_ERROR:
                    kept = result
        finally:
            self._since = 0.0

    async def _wait_writable(self, fileno: int) -> None:
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()  # the watchdog's to fail too

        def writable() -> None:
            if not waiter.done():
                waiter.set_result(None)

        loop.add_writer(fileno, writable)
        try:
            await waiter
        finally:
            self._waiter = None
            loop.remove_writer(fileno)


class NoAnswer(Exception):
    """A round trip waited ``answer_wait`` without the server's answer (the lane's own)."""


_background: set[asyncio.Task[None]] = set()
"""Cancels of unanswered statements still running (a task must be referenced until it ends)."""


def first_uuid(result: pq.abc.PGresult, index: int) -> tuple[uuid.UUID]:
    """A row whose first column is a uuid (in text), as a one-tuple like psycopg's tuple rows."""
    value = result.get_value(index, 0)
    if value is None:  # pragma: no cover - the statement returns ids
        raise psycopg.DataError("a NULL id")
    # PostgreSQL writes a uuid one way (36 characters, lower-case hex and four hyphens): its
    # hex digits read as an int, without ``UUID``'s parsing of every other spelling (4-5 % of
    # a single submit's CPU in the submitting process, py-spy).
    return (uuid_of(int(bytes(value).replace(b"-", b""), 16)),)
