"""The named-query helpers the PostgreSQL store's mixins share: each call takes a pooled
connection in autocommit mode, so one statement is its own transaction."""

from __future__ import annotations

from typing import Any

from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from tickwheel.store.postgres.pool import Conn
from tickwheel.store.sqlfile import load_queries

Q = load_queries("tickwheel.store.postgres.sql")


class PostgresQueries:
    _pool: AsyncConnectionPool[Conn]

    async def _all(self, query: str, params: dict[str, Any]) -> list[DictRow]:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q[query], params)
            return await cursor.fetchall()

    async def _one(self, query: str, params: dict[str, Any]) -> DictRow | None:
        rows = await self._all(query, params)
        return rows[0] if rows else None

    async def _rowcount(self, query: str, params: dict[str, Any]) -> int:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q[query], params)
            return cursor.rowcount
