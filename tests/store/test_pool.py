"""The PostgreSQL pool's checkout (``store/postgres/pool.py``): an idle connection is handed
over without a timer, and one whose session is gone is still never lent, the pool marking the
database down and lending a live connection instead."""

from __future__ import annotations

import asyncio

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
