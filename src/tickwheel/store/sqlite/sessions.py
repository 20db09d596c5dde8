"""Dashboard sessions on SQLite, on the main store's connection and lock."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tickwheel.store.session_protocol import DashboardSession
from tickwheel.store.sqlite.codec import from_us, to_us
from tickwheel.store.sqlite.connection import Q, SqliteConnection
from tickwheel.store.sqlite.rows import api_key_row


class SqliteSessionStore(SqliteConnection):
    async def _rowcount(self, query: str, params: dict[str, Any]) -> int:
        async with self._tx() as conn:
            return (await conn.execute(Q[query], params)).rowcount

    async def dashboard_session_insert(
        self, session_hash: str, key_id: str | None, created_at: datetime, expires_at: datetime
    ) -> None:
        params = {
            "session_hash": session_hash,
            "key_id": key_id,
            "created_at": to_us(created_at),
            "expires_at": to_us(expires_at),
        }
        await self._rowcount("dashboard_session_insert", params)

    async def dashboard_session_get(
        self, session_hash: str, now: datetime
    ) -> DashboardSession | None:
        params = {"session_hash": session_hash, "now": to_us(now)}
        rows = await self._all("dashboard_session_get", params)
        if not rows:
            return None
        row = rows[0]
        key = api_key_row(row) if row["key_id"] is not None else None
        return DashboardSession(key, from_us(row["expires_at"]))

    async def dashboard_session_delete(self, session_hash: str) -> bool:
        params = {"session_hash": session_hash}
        return await self._rowcount("dashboard_session_delete", params) == 1

    async def dashboard_session_prune(self, now: datetime) -> int:
        return await self._rowcount("dashboard_session_prune", {"now": to_us(now)})
