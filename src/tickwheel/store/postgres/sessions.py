"""Dashboard sessions on PostgreSQL, on the main store's pool."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from tickwheel.store.postgres.pool import Conn
from tickwheel.store.postgres.rows import api_key_from_row, require_aware, utc
from tickwheel.store.session_protocol import DashboardSession
from tickwheel.store.sqlfile import load_queries

Q = load_queries("tickwheel.store.postgres.sql")


class PostgresSessionStore:
    def __init__(self, pool: AsyncConnectionPool[Conn]) -> None:
        self._pool = pool

    async def _rowcount(self, query: str, params: dict[str, Any]) -> int:
        async with self._pool.connection() as conn:
            return (await conn.execute(Q[query], params)).rowcount

    async def dashboard_session_insert(
        self, session_hash: str, key_id: str | None, created_at: datetime, expires_at: datetime
    ) -> None:
        params = {
            "session_hash": session_hash,
            "key_id": key_id,
            "created_at": require_aware(created_at),
            "expires_at": require_aware(expires_at),
        }
        await self._rowcount("dashboard_session_insert", params)

    async def dashboard_session_get(
        self, session_hash: str, now: datetime
    ) -> DashboardSession | None:
        params = {"session_hash": session_hash, "now": require_aware(now)}
        async with self._pool.connection() as conn:
            row = await (await conn.execute(Q["dashboard_session_get"], params)).fetchone()
        if row is None:
            return None
        key = api_key_from_row(row) if row["key_id"] is not None else None
        return DashboardSession(key, utc(row["expires_at"]))

    async def dashboard_session_delete(self, session_hash: str) -> bool:
        params = {"session_hash": session_hash}
        return await self._rowcount("dashboard_session_delete", params) == 1

    async def dashboard_session_prune(self, now: datetime) -> int:
        return await self._rowcount("dashboard_session_prune", {"now": require_aware(now)})
