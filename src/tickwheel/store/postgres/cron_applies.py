"""``cron apply``'s idempotency keys on PostgreSQL: a retried apply finds the first one's result
(or that it is still running) instead of applying again. A mixin of ``PostgresCronStore``."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb

from tickwheel.store.cron_protocol import ApplyBegun
from tickwheel.store.sqlfile import load_queries

Q = load_queries("tickwheel.store.postgres.sql")

Conn = AsyncConnection[DictRow]


class PostgresCronApplies:
    _tx: Callable[[], AbstractAsyncContextManager[Conn]]
    """``PostgresCronStore._tx``: one transaction on the pool."""

    async def cron_apply_begin(
        self, tenant: str, key: str, request_hash: str, now: datetime, stale: timedelta
    ) -> ApplyBegun:
        params = {"tenant": tenant, "apply_key": key, "request_hash": request_hash}
        async with self._tx() as conn:
            before = now - timedelta(days=1)
            await conn.execute(Q["cron_apply_forget"], {"tenant": tenant, "before": before})
            cursor = await conn.execute(Q["cron_apply_begin"], {**params, "now": now})
            if cursor.rowcount == 1:
                return ApplyBegun("new")
            cursor = await conn.execute(Q["cron_apply_get"], params)
            row = await cursor.fetchone()
        if row is None:  # forgotten between the two statements: start afresh
            return await self.cron_apply_begin(tenant, key, request_hash, now, stale)
        if row["request_hash"] != request_hash:
            return ApplyBegun("mismatch")
        if row["result"] is not None:
            return ApplyBegun("done", row["result"])
        if row["started_at"] > now - stale:
            return ApplyBegun("running")
        seen = {**params, "now": now, "seen_started_at": row["started_at"]}
        async with self._tx() as conn:
            cursor = await conn.execute(Q["cron_apply_take_over"], seen)
            return ApplyBegun("new" if cursor.rowcount == 1 else "running")

    async def cron_apply_finish(self, tenant: str, key: str, result: dict[str, Any]) -> None:
        params = {"tenant": tenant, "apply_key": key, "result": Jsonb(result)}
        async with self._tx() as conn:
            await conn.execute(Q["cron_apply_finish"], params)

    async def cron_apply_abandon(self, tenant: str, key: str) -> None:
        async with self._tx() as conn:
            await conn.execute(Q["cron_apply_abandon"], {"tenant": tenant, "apply_key": key})
