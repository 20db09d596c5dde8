"""The worker registry on SQLite: mixed into ``SqliteStore`` (its connection and lock)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from tickwheel.store.protocol import WorkerInfo
from tickwheel.store.sqlite.codec import from_us, to_us
from tickwheel.store.sqlite.connection import SqliteConnection


def _worker(r: sqlite3.Row) -> WorkerInfo:
    stopped = r["stopped_at"]
    return WorkerInfo(
        r["worker_id"],
        r["host"],
        r["pid"],
        r["concurrency"],
        from_us(r["started_at"]),
        from_us(r["last_heartbeat_at"]),
        r["running"],
        from_us(stopped) if stopped is not None else None,
    )


class SqliteWorkerRegistry(SqliteConnection):
    async def worker_heartbeat(
        self,
        worker_id: str,
        host: str,
        pid: int,
        concurrency: int,
        running: int,
        now: datetime | None = None,
    ) -> None:
        params = {
            "worker_id": worker_id,
            "host": host,
            "pid": pid,
            "concurrency": concurrency,
            "running": running,
            "now": to_us(now or datetime.now(UTC)),
        }
        await self._all("worker_heartbeat", params)

    async def worker_stopped(self, worker_id: str, now: datetime | None = None) -> None:
        params = {"worker_id": worker_id, "now": to_us(now or datetime.now(UTC))}
        await self._all("worker_stopped", params)

    async def worker_list(self, alive_since: datetime) -> list[WorkerInfo]:
        rows = await self._all("worker_list", {"alive_since": to_us(alive_since)})
        return [_worker(r) for r in rows]

    async def worker_count_alive(self, alive_since: datetime) -> int:
        rows = await self._all("worker_count_alive", {"alive_since": to_us(alive_since)})
        return int(rows[0]["n"])

    async def concurrency_counts(self) -> tuple[int, int]:
        [row] = await self._all("concurrency_counts", {})
        return int(row["waiting"]), int(row["held"])

    async def execution_oldest_ready_at(self) -> datetime | None:
        rows = await self._all("execution_oldest_ready", {})
        oldest = rows[0]["oldest"] if rows else None
        return from_us(oldest) if oldest is not None else None
