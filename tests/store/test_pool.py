"""The PostgreSQL pool's checkout (``store/postgres/pool.py``): an idle connection is handed
over without a timer, and one whose session is gone is still never lent, the pool marking the
database down and lending a live connection instead; and its sockets probe a silent peer
within about a minute (``KEEPALIVES``) unless the URL says otherwise."""

from __future__ import annotations

import asyncio
import socket

import psycopg
import pytest

from tickwheel.store.postgres.pool import Pool

pytestmark = pytest.mark.postgres


async def _backend_pid(pool: Pool) -> int:
    async with pool.connection() as conn:
        row = await (await conn.execute("SELECT pg_backend_pid() AS pid")).fetchone()
        assert row is not None
        return int(row["pid"])


async def test_an_idle_connection_whose_session_was_killed_is_replaced(pg_url: str) -> None:
    pool = Pool(pg_url, min_size=1, max_size=1, timeout=10)
    await pool.open(wait=True)
    try:
        first = await _backend_pid(pool)
        assert await _backend_pid(pool) == first  # the idle connection, lent again
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
            await admin.execute("SELECT pg_terminate_backend(%s, 5000)", [first])
        await asyncio.sleep(0.2)  # the server's goodbye reaches the idle socket
        # Lent at once from the idle one (no timer): its check fails, and a new session is
        # made and lent instead of a dead one.
        again = await _backend_pid(pool)
        assert again != first
        assert not pool._down  # the new connection said the database is back
    finally:
        await pool.close()


def _tcp_settings(fd: int) -> tuple[int, int, int, int, int]:
    """A socket's keepalive switch, idle seconds, probe interval, probe count and user timeout
    (ms), as the kernel has them."""
    with socket.socket(fileno=fd) as sock:
        try:
            return (
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
            )
        finally:
            sock.detach()  # the descriptor stays the connection's


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", (1, 30, 10, 3, 60000)),
        ("keepalives_idle=7&tcp_user_timeout=9000", (1, 7, 10, 3, 9000)),
    ],
)
async def test_sessions_notice_a_silent_peer_within_a_minute_unless_the_url_says(
    pg_url: str, query: str, expected: tuple[int, ...]
) -> None:
    assert pg_url.startswith("postgresql://") and "?" not in pg_url  # a TCP URL, as in CI
    pool = Pool(f"{pg_url}?{query}" if query else pg_url, min_size=1, max_size=1, timeout=10)
    await pool.open(wait=True)
    try:
        async with pool.connection() as conn:
            assert _tcp_settings(conn.pgconn.socket) == expected
    finally:
        await pool.close()
