"""The connection pool every PostgreSQL store shares, with two duties on top of psycopg_pool's.

1. A connection is checked before it is lent: after a restart of the database or a terminated
   session, the pool would otherwise hand out connections whose server side is gone, and each
   would fail one request. The check costs a ``poll`` on the socket, not a round trip: an idle
   connection has nothing to read unless the server spoke first, and a server that ends a session
   (shutdown, ``pg_terminate_backend``, a crashed backend) always does, with a FATAL message or
   the end of the stream. Only then does the pool's own round-trip check decide.
2. A lost database becomes ``Unavailable`` (the API's 503 with ``Retry-After``) instead of a
   driver error that would surface as a 500: failing to get a connection in time, a connection
   that broke under a statement, or the server refusing sessions while it starts or stops.

3. A session on a server that no longer takes writes (a primary just demoted, or a multi-host URL
   that reached a standby) fails every write with "read-only transaction" (SQLSTATE 25006): it
   counts as lost too (503, retried), and the connection is closed instead of returned, so that
   the pool's next connection goes to whichever node is primary now.

A URL that names several hosts (``postgresql://h1:p1,h2:p2/db``) reaches the primary of an HA
pair: unless it says otherwise, ``primary_conninfo`` adds ``target_session_attrs=read-write``,
so that libpq tries the hosts in turn and keeps the one that takes writes (docs/ha.md).

From the first sign of an outage (a failed check, a lost connection) until a new connection
succeeds, callers wait at most ``OUTAGE_WAIT`` for a connection instead of the pool's full
timeout, those already waiting included, so an outage answers quickly. Reconnection attempts
back off for at most ``RECONNECT_SECONDS`` before the pool gives up and starts again at the next
request, so a long outage does not leave the pool sleeping through the database's return."""

from __future__ import annotations

import asyncio
import logging
import os
import select
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from tickwheel.domain.errors import Unavailable

log = logging.getLogger("tickwheel.store")

Conn = AsyncConnection[DictRow]

OUTAGE_WAIT = 1.0
RECONNECT_SECONDS = 10.0
RETRY_AFTER = 2
# A write on a server in recovery or demoted: "cannot execute ... in a read-only transaction".
READ_ONLY_STATES = ("25006",)
# SQLSTATEs that say the session or the server is going away, not that the statement was wrong:
# class 08 (connection exception), admin/crash shutdown, "cannot connect now" (starting up or
# shutting down), too many connections.
_LOST_STATES = ("57P01", "57P02", "57P03", "53300", *READ_ONLY_STATES)


def connection_lost(exc: BaseException, conn: Conn | None = None) -> bool:
    """Whether ``exc`` means the database could not be reached or the session is gone (worth a
    retry later) rather than a fault of the statement itself."""
    if not isinstance(exc, psycopg.Error):
        return False
    if conn is not None and (conn.broken or conn.closed):
        return True
    if isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None:
        return True  # raised by the client: connection refused, closed, or lost mid-statement
    state = exc.sqlstate or ""
    return state.startswith("08") or state in _LOST_STATES


def primary_conninfo(url: str, *, reads: bool = False) -> str:
    """``url`` as a connection string that only accepts a primary when it lists several hosts
    and does not choose itself (``target_session_attrs`` absent). One host is taken as given:
    it may be a proxy or a managed service's endpoint that follows the primary. ``reads``: for
    reads that may lag, a standby is preferred instead (the primary if none answers)."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise ValueError(f"unreadable PostgreSQL URL: {_first_line(exc)}") from exc
    hosts = str(params.get("host") or params.get("hostaddr") or "")
    if "," in hosts and "target_session_attrs" not in params:
        params["target_session_attrs"] = "prefer-standby" if reads else "read-write"
    return make_conninfo("", **params)


SESSION_UTC = "-c TimeZone=UTC"
"""Every session of the store's pools runs in UTC, whatever the server's or the database's
TimeZone. psycopg then reads each timestamptz with ``datetime.UTC`` as its zone at no cost, and
``rows.utc``'s ``astimezone(UTC)`` returns it as it is. In any other zone (Debian's default is
``Etc/UTC``, another zone object) psycopg converted each one into that zone and ``rows.utc``
converted it back: 1.3 µs a timestamp for nothing, and a claimed row holds eight. SQL that
depends on the session's zone (``date_trunc`` in stats.sql) now means UTC on every server, as
the rest of the store always did."""


def session_options(conninfo: str, extra: str | None = None) -> str:
    """The sessions' ``options``: the URL's own (or ``PGOPTIONS``, as libpq would take it), then
    ``SESSION_UTC``, then ``extra``; the last setting of a name wins. Setting ``options`` hides
    the URL's and the environment's from libpq, so they are carried over here."""
    given = conninfo_to_dict(conninfo).get("options") or os.environ.get("PGOPTIONS")
    return " ".join(str(part) for part in (given, SESSION_UTC, extra) if part)


KEEPALIVES = {
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "60000",
}
"""Every session's TCP settings unless the URL gives its own. A database host that vanished (a
crash, a partition: nothing closes the socket) is noticed within about a minute, by keepalive
probes while a statement waits for its answer or a connection sits idle, and by
``tcp_user_timeout`` (ms) while sent bytes go unacknowledged, instead of the system's defaults:
two hours of silence before the first probe, ~15 minutes of retransmissions. Over a Unix socket
libpq ignores them."""


def with_keepalives(conninfo: str) -> str:
    """``conninfo`` with ``KEEPALIVES`` for each setting it does not give itself."""
    return make_conninfo("", **{**KEEPALIVES, **conninfo_to_dict(conninfo)})


def read_only(exc: BaseException) -> bool:
    """Whether ``exc`` says the session's server does not take writes (any more)."""
    return isinstance(exc, psycopg.Error) and exc.sqlstate in READ_ONLY_STATES


class Pool(AsyncConnectionPool[Conn]):
    """``AsyncConnectionPool`` with a connection check and ``Unavailable`` on outages."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int,
        max_size: int,
        timeout: float,
        reads: bool = False,
        options: str | None = None,
        warm: Callable[[Conn], Awaitable[None]] | None = None,
    ) -> None:
        self._down = False
        # Run on each new connection before it is lent (``warm_up``): see its caller.
        self._warm = warm
        self._loop: asyncio.AbstractEventLoop | None = None  # the one it was opened on
        # Asked to give a kept connection back when a caller finds none idle (SubmitLane).
        self.keeper: Callable[[], Awaitable[None]] | None = None
        # Callers waiting for a connection: the timer of each and its deadline at the start.
        self._waits: dict[asyncio.Timeout, float] = {}
        conninfo = with_keepalives(primary_conninfo(url, reads=reads))
        super().__init__(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            open=False,
            timeout=timeout,
            connection_class=Conn,
            kwargs={
                "autocommit": True,
                "row_factory": dict_row,
                "options": session_options(conninfo, options),
            },
            check=self._check,
            configure=self._connected,
            reconnect_timeout=RECONNECT_SECONDS,
        )

    async def _connected(self, conn: Conn) -> None:
        """Called by the pool for each new connection: the database is reachable again. Then
        the pool's ``warm`` statements, if any, before the connection is first lent."""
        if self._down:
            log.warning("database reachable again")
            self._down = False
            self._reschedule_waits(None)
        if self._warm is not None:
            await warm_up(conn, self._warm)

    async def _check(self, conn: Conn) -> None:
        if conn.broken or conn.closed:
            self._mark_down("a pooled connection was closed")
            raise psycopg.OperationalError("the connection is closed")
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN)
        if poller.poll(0):
            try:
                await AsyncConnectionPool.check_connection(conn)
            except psycopg.Error as exc:
                self._mark_down(_first_line(exc))
                raise

    def _mark_down(self, why: str) -> None:
        if not self._down:
            log.warning("database connection lost (%s); answering 503 until it is back", why)
        self._down = True
        # Callers already waiting for a connection stop waiting soon too, instead of sitting out
        # the pool's full timeout for a database that is not there.
        self._reschedule_waits(asyncio.get_running_loop().time() + OUTAGE_WAIT)

    def _reschedule_waits(self, soon: float | None) -> None:
        """Moves each waiting caller's deadline to ``soon`` if that is earlier, or back to its
        own deadline (``None``)."""
        for limit, deadline in self._waits.items():
            if not limit.expired():  # an expiring timer cannot be moved, nor needs to be
                limit.reschedule(deadline if soon is None else min(deadline, soon))

    async def _lend(self, timeout: float | None) -> Conn:
        wait = self.timeout if timeout is None else timeout
        if self._down:
            wait = min(wait, OUTAGE_WAIT)
        try:
            if self._pool and not self._down:
                # A connection is idle: the pool hands it over without waiting (nothing yields
                # between this test and its ``popleft``), so there is no wait to shorten and no
                # timer to arm (a third of a checkout's CPU). The only wait left is the one after
                # a failed check, which marks the pool down: at most OUTAGE_WAIT, as a waiting
                # caller's deadline is then moved to.
                return await self.getconn(min(wait, OUTAGE_WAIT))
            if self.keeper is not None:
                # None idle: a connection kept aside (the single submissions' lane, when not
                # running one) comes back first, so that keeping it never makes others wait.
                await self.keeper()
            async with asyncio.timeout(wait) as limit:
                self._waits[limit] = asyncio.get_running_loop().time() + wait
                try:
                    return await self.getconn(wait)
                finally:
                    del self._waits[limit]
        except PoolClosed as exc:
            raise Unavailable(
                "the database pool is closed (the server is stopping); retry shortly"
            ) from exc
        except (PoolTimeout, TimeoutError) as exc:
            if self._down:
                raise Unavailable(
                    "the database is unavailable; retry shortly", RETRY_AFTER
                ) from exc
            # Every connection stayed busy for the whole wait: not the request's fault either.
            raise Unavailable(
                f"no database connection became free within {wait:g} s; retry shortly",
                RETRY_AFTER,
            ) from exc

    @asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[Conn]:
        conn = await self._lend(timeout)
        try:
            async with conn:  # a pooled connection is not closed here, only its transaction ended
                yield conn
        except psycopg.Error as exc:
            if not connection_lost(exc, conn):
                raise
            raise await self.lost(exc, conn) from exc
        finally:
            await self.putconn(conn)

    async def lost(self, exc: psycopg.Error, conn: Conn) -> Unavailable:
        """What a statement that failed with ``exc`` on ``conn``, lent by this pool, raises when
        ``connection_lost`` says the session or the database is gone: the pool is marked down
        and a session that no longer takes writes is closed (the caller still returns it)."""
        self._mark_down(_first_line(exc))
        if read_only(exc):
            # Alive but not a primary: dropped, so that the pool connects anew and libpq
            # picks the node that takes writes now.
            await conn.close()
        # The driver's text names the database host: it goes to the log, not to the client.
        return Unavailable("the database connection was lost; retry shortly", RETRY_AFTER)

    async def open(self, wait: bool = False, timeout: float = 30.0) -> None:
        self._loop = asyncio.get_running_loop()
        await super().open(wait=wait, timeout=timeout)

    @property
    def waiting(self) -> bool:
        """Whether a caller waits for a connection to become free."""
        return bool(self._waiting)

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the pool was opened on, whose tasks make its connections."""
        return self._loop

    async def lend_idle(self) -> Conn | None:
        """An idle connection for a caller that keeps it a while (``SubmitLane``), or None when
        none is idle, the database looks down, the pool could lend no other connection
        meanwhile (fewer than two at most), or the caller runs on another event loop than the
        pool's (a blocking ``Client``'s thread): the pool grows by tasks on its own loop, which
        such a caller may be blocking. Never waits for a connection to become free."""
        if self.max_size < 2 or not self._pool or self._down:
            return None
        if asyncio.get_running_loop() is not self._loop:
            return None
        return await self._lend(None)


async def warm_up(conn: Conn, warm: Callable[[Conn], Awaitable[None]]) -> None:
    """Runs ``warm`` on a new connection: statements prepared ahead as no-ops, so that their
    first real run is neither parsed nor planned, nor the first of its session to read the
    catalog of its tables. A failure is logged, never raised: the connection serves as it is
    (its statements are prepared at their first runs instead), and a pool that failed every
    new connection over a missing table (a database not migrated yet) would never fill."""
    try:
        await warm(conn)
    except psycopg.Error as exc:
        log.debug("statements not prepared ahead: %s", _first_line(exc))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
