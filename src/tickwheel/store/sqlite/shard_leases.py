"""Shard leases on SQLite: mixed into ``SqliteStore`` (its connection, lock and events).

SQLite has one writer at a time (``BEGIN IMMEDIATE``), so the guards need no row locks: each
write transaction sees the latest committed leases. Several schedulers on one SQLite file is not
a deployment we recommend, but the semantics are the same as on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwheel.domain.models import ShardLease
from tickwheel.store.protocol import Topic
from tickwheel.store.sqlfile import load_queries
from tickwheel.store.sqlite.codec import from_us, to_us
from tickwheel.store.sqlite.connection import SqliteConnection

Q = load_queries("tickwheel.store.sqlite.sql")


def _lease(r: sqlite3.Row) -> ShardLease:
    watermark = r["watermark"]
    return ShardLease(
        r["shard_id"],
        r["owner"],
        r["epoch"],
        from_us(r["expires_at"]),
        from_us(watermark) if watermark is not None else None,
    )


def _params(owner: str, now: datetime | None, **more: Any) -> dict[str, Any]:
    return {"owner": owner, "now": to_us(now or datetime.now(UTC)), **more}


def _grants(leases: Sequence[ShardLease]) -> str:
    return json.dumps([[lease.shard_id, lease.epoch] for lease in leases])


def _sorted(rows: Sequence[sqlite3.Row]) -> list[ShardLease]:
    return sorted((_lease(r) for r in rows), key=lambda lease: lease.shard_id)


class SqliteShardLeases(SqliteConnection):
    _events: dict[Topic, asyncio.Event]

    async def shard_lease_acquire(
        self, owner: str, shards_wanted: int, ttl: timedelta, now: datetime | None = None
    ) -> list[ShardLease]:
        at = now or datetime.now(UTC)
        params = _params(owner, at, expires_at=to_us(at + ttl), limit=shards_wanted)
        async with self._tx() as conn:
            await conn.execute(Q["shard_owner_touch"], params)
            if shards_wanted <= 0:
                return []
            cursor = await conn.execute(Q["shard_lease_acquire"], params)
            rows = list(await cursor.fetchall())
        return _sorted(rows)

    async def shard_lease_renew(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        ttl: timedelta,
        now: datetime | None = None,
    ) -> list[ShardLease]:
        at = now or datetime.now(UTC)
        params = _params(owner, at, expires_at=to_us(at + ttl), grants=_grants(leases))
        async with self._tx() as conn:
            await conn.execute(Q["shard_owner_touch"], params)
            cursor = await conn.execute(Q["shard_lease_renew"], params)
            rows = list(await cursor.fetchall())
        return _sorted(rows)

    async def shard_lease_release(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        now: datetime | None = None,
        *,
        leaving: bool = False,
    ) -> None:
        params = _params(owner, now, grants=_grants(leases))
        async with self._tx() as conn:
            await conn.execute(Q["shard_lease_release"], params)
            if leaving:
                await conn.execute(Q["shard_owner_leave"], params)

    async def shard_lease_counts(self, now: datetime | None = None) -> dict[str, int]:
        rows = await self._all("shard_lease_counts", _params("", now))
        return {str(r["owner"]): int(r["n"]) for r in rows}

    async def shard_lease_open(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        through: datetime,
        now: datetime | None = None,
    ) -> list[int]:
        params = _params(owner, now, grants=_grants(leases), through=to_us(through))
        async with self._tx() as conn:
            cursor = await conn.execute(Q["shard_lease_fence"], params)
            held = [int(r["shard_id"]) for r in await cursor.fetchall()]
            if held:
                await conn.execute(Q["shard_lease_open"], params)
        if held:
            self._events[Topic.READY].set()
        return held

    async def shard_lease_grace(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        through: datetime,
        now: datetime | None = None,
        *,
        counted: Collection[int] | None = None,
    ) -> tuple[int, list[int]]:
        grants = [
            [lease.shard_id, lease.epoch, counted is None or lease.shard_id in counted]
            for lease in leases
        ]
        params = _params(owner, now, grants=json.dumps(grants), through=to_us(through))
        # One write transaction (one writer at a time): no claim commits between the count and
        # the close, which is then asked only for the shards counted empty.
        async with self._tx() as conn:
            cursor = await conn.execute(Q["shard_lease_grace"], params)
            counts = list(await cursor.fetchall())
            empty = [[int(r["shard_id"]), int(r["epoch"])] for r in counts if not r["n"]]
            closed: list[int] = []
            if empty:
                params["grants"] = json.dumps(empty)
                cursor = await conn.execute(Q["shard_lease_close"], params)
                closed = sorted(int(r["shard_id"]) for r in await cursor.fetchall())
        return sum(int(r["n"]) for r in counts), closed
