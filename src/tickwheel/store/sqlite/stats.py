"""The dashboard's aggregates on SQLite, on the main store's connection and lock (reads only)."""

from __future__ import annotations

from datetime import datetime

from tickwheel.store.sqlite.codec import from_us, to_us
from tickwheel.store.sqlite.connection import SqliteConnection
from tickwheel.store.stats_protocol import LeaseOwner, MinuteCount, StartSample, StatusCount


def _opt(value: int | None) -> datetime | None:
    return from_us(value) if value is not None else None


class SqliteStatsStore(SqliteConnection):
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
