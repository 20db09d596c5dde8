"""The dashboard's aggregates on SQLite, on the main store's connection and lock (reads only)."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import datetime
from typing import Any

import aiosqlite

from tickwheel.store.sqlfile import load_queries
from tickwheel.store.sqlite.codec import from_us, to_us
from tickwheel.store.stats_protocol import LeaseOwner, MinuteCount, StartSample, StatusCount

Q = load_queries("tickwheel.store.sqlite.sql")


def _opt(value: int | None) -> datetime | None:
    return from_us(value) if value is not None else None


class SqliteStatsStore:
    def __init__(self, conn: aiosqlite.Connection, lock: asyncio.Lock) -> None:
        self._conn = conn
        self._lock = lock

    async def _all(self, query: str, params: dict[str, Any]) -> list[sqlite3.Row]:
        async with self._lock:
            cursor = await self._conn.execute(Q[query], params)
            return list(await cursor.fetchall())

    async def stats_status_counts(self, tenant: str) -> list[StatusCount]:
        rows = await self._all("stats_status_counts", {"tenant": tenant})
        return [StatusCount(r["status"], r["n"], _opt(r["oldest_ready_at"])) for r in rows]

    async def stats_starts_per_minute(self, tenant: str, since: datetime) -> list[MinuteCount]:
        rows = await self._all("stats_starts_per_minute", {"tenant": tenant, "since": to_us(since)})
        return [MinuteCount(from_us(r["minute"]), r["n"]) for r in rows]

    async def stats_start_sample(
        self, tenant: str, since: datetime, limit: int
    ) -> list[StartSample]:
        params = {"tenant": tenant, "since": to_us(since), "limit": limit}
        rows = await self._all("stats_start_sample", params)
        return [StartSample(from_us(r["started_at"]), from_us(r["execute_at"])) for r in rows]

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
