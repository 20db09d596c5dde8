"""The worker registry on PostgreSQL: mixed into ``PostgresStore`` (its pool)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from tickwheel.store.postgres.rows import opt_aware, require_aware
from tickwheel.store.protocol import WorkerInfo
from tickwheel.store.sqlfile import load_queries

Q = load_queries("tickwheel.store.postgres.sql")
Conn = AsyncConnection[DictRow]


def _worker(r: DictRow) -> WorkerInfo:
    stopped = r["stopped_at"]
    return WorkerInfo(
        r["worker_id"],
        r["host"],
        r["pid"],
        r["concurrency"],
        r["started_at"].astimezone(UTC),
        r["last_heartbeat_at"].astimezone(UTC),
        r["running"],
        stopped.astimezone(UTC) if stopped is not None else None,
    )


class PostgresWorkerRegistry:
    _pool: AsyncConnectionPool[Conn]

    async def _run(self, query: str, params: dict[str, Any]) -> list[DictRow]:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q[query], params)
            return await cursor.fetchall() if cursor.description else []

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
            "now": opt_aware(now),
        }
        await self._run("worker_heartbeat", params)

    async def worker_stopped(self, worker_id: str, now: datetime | None = None) -> None:
        await self._run("worker_stopped", {"worker_id": worker_id, "now": opt_aware(now)})

    async def worker_list(self, alive_since: datetime) -> list[WorkerInfo]:
        rows = await self._run("worker_list", {"alive_since": require_aware(alive_since)})
        return [_worker(r) for r in rows]

    async def worker_count_alive(self, alive_since: datetime) -> int:
        rows = await self._run("worker_count_alive", {"alive_since": require_aware(alive_since)})
        return int(rows[0]["n"])

    async def concurrency_counts(self) -> tuple[int, int]:
        [row] = await self._run("concurrency_counts", {})
        return int(row["waiting"]), int(row["held"])

    async def execution_oldest_ready_at(self) -> datetime | None:
        rows = await self._run("execution_oldest_ready", {})
        oldest = rows[0]["oldest"] if rows else None
        return oldest.astimezone(UTC) if oldest is not None else None
