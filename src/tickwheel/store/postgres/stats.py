"""The dashboard's aggregates on PostgreSQL, on the main store's pool (reads only)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from tickwheel.store.sqlfile import load_queries
from tickwheel.store.stats_protocol import LeaseOwner, MinuteCount, StartSample, StatusCount

Q = load_queries("tickwheel.store.postgres.sql")
Conn = AsyncConnection[DictRow]


def _opt(value: datetime | None) -> datetime | None:
    return value.astimezone(UTC) if value is not None else None


class PostgresStatsStore:
    def __init__(self, pool: AsyncConnectionPool[Conn]) -> None:
        self._pool = pool

    async def _all(self, query: str, params: dict[str, Any]) -> list[DictRow]:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q[query], params)
            return await cursor.fetchall()

    async def stats_status_counts(self, tenant: str) -> list[StatusCount]:
        rows = await self._all("stats_status_counts", {"tenant": tenant})
        return [StatusCount(r["status"], r["n"], _opt(r["oldest_ready_at"])) for r in rows]

    async def stats_starts_per_minute(self, tenant: str, since: datetime) -> list[MinuteCount]:
        rows = await self._all("stats_starts_per_minute", {"tenant": tenant, "since": since})
        return [MinuteCount(r["minute"].astimezone(UTC), r["n"]) for r in rows]

    async def stats_start_sample(
        self, tenant: str, since: datetime, limit: int
    ) -> list[StartSample]:
        params = {"tenant": tenant, "since": since, "limit": limit}
        rows = await self._all("stats_start_sample", params)
        return [
            StartSample(r["started_at"].astimezone(UTC), r["execute_at"].astimezone(UTC))
            for r in rows
        ]

    async def stats_lease_owners(self, tenant: str) -> list[LeaseOwner]:
        rows = await self._all("stats_lease_owners", {"tenant": tenant})
        return [
            LeaseOwner(
                r["lease_owner"] or "?",
                r["n"],
                _opt(r["latest_lease_expires_at"]),
                _opt(r["oldest_started_at"]),
            )
            for r in rows
        ]
