"""Shard leases on PostgreSQL: mixed into ``PostgresStore`` (its pool and signals).

The database's clock decides every lease (``now`` is None in production), so a scheduler whose
own clock is skewed can neither keep a lease past its expiry nor take one early."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from tickwheel.domain.models import ShardLease
from tickwheel.store.postgres.notify import Signals
from tickwheel.store.postgres.rows import opt_aware
from tickwheel.store.protocol import LeasedPromotion, Topic
from tickwheel.store.sqlfile import load_queries

Q = load_queries("tickwheel.store.postgres.sql")
Conn = AsyncConnection[DictRow]


def _lease(r: DictRow) -> ShardLease:
    watermark = r["watermark"]
    return ShardLease(
        r["shard_id"],
        r["owner"],
        r["epoch"],
        r["expires_at"].astimezone(UTC),
        watermark.astimezone(UTC) if watermark is not None else None,
    )


def _grants(owner: str, leases: Sequence[ShardLease], now: datetime | None) -> dict[str, Any]:
    return {
        "owner": owner,
        "shards": [lease.shard_id for lease in leases],
        "epochs": [lease.epoch for lease in leases],
        "now": opt_aware(now),
    }


class PostgresShardLeases:
    _pool: AsyncConnectionPool[Conn]
    _signals: Signals

    async def shard_lease_acquire(
        self, owner: str, shards_wanted: int, ttl: timedelta, now: datetime | None = None
    ) -> list[ShardLease]:
        params = {"owner": owner, "limit": shards_wanted, "ttl": ttl, "now": opt_aware(now)}
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(Q["shard_owner_touch"], params)
            if shards_wanted <= 0:
                return []
            cursor = await conn.execute(Q["shard_lease_acquire"], params)
            rows = await cursor.fetchall()
        return sorted((_lease(r) for r in rows), key=lambda lease: lease.shard_id)

    async def shard_lease_renew(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        ttl: timedelta,
        now: datetime | None = None,
    ) -> list[ShardLease]:
        params = {**_grants(owner, leases, now), "ttl": ttl}
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(Q["shard_owner_touch"], params)
            cursor = await conn.execute(Q["shard_lease_renew"], params)
            rows = await cursor.fetchall()
        return sorted((_lease(r) for r in rows), key=lambda lease: lease.shard_id)

    async def shard_lease_release(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        now: datetime | None = None,
        *,
        leaving: bool = False,
    ) -> None:
        params = _grants(owner, leases, now)
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(Q["shard_lease_release"], params)
            if leaving:
                await conn.execute(Q["shard_owner_leave"], params)

    async def shard_lease_counts(self, now: datetime | None = None) -> dict[str, int]:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q["shard_lease_counts"], {"now": opt_aware(now)})
            return {str(r["owner"]): int(r["n"]) for r in await cursor.fetchall()}

    async def execution_promote_due_leased(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        limit: int,
        now: datetime | None = None,
    ) -> LeasedPromotion:
        grants = _grants(owner, leases, now)
        topics: set[Topic] = set()
        async with self._pool.connection() as conn, conn.transaction():
            # The fence comes first and its row locks last until commit: the promotion below
            # only touches shards this grant still holds at the moment it runs.
            cursor = await conn.execute(Q["shard_lease_fence"], grants)
            held = [int(r["shard_id"]) for r in await cursor.fetchall()]
            fenced = sorted({lease.shard_id for lease in leases} - set(held))
            refused = 0
            if fenced:
                params = {"shards": fenced, "now": grants["now"]}
                cursor = await conn.execute(Q["execution_count_due"], params)
                row = await cursor.fetchone()
                refused = int(row["n"]) if row else 0
            promoted = 0
            if held:
                params = {"shards": held, "limit": limit, "now": grants["now"]}
                scheduled = await conn.execute(Q["execution_promote_scheduled"], params)
                retries = await conn.execute(Q["execution_promote_retries"], params)
                promoted = scheduled.rowcount + retries.rowcount
                if scheduled.rowcount < limit:
                    # Nothing due is left in these shards: the watermark may move to now.
                    await conn.execute(Q["shard_lease_watermark"], {**params, "owner": owner})
                if promoted:
                    topics.add(Topic.READY)
            await self._signals.notify(conn, topics)
        self._signals.signal(topics)
        return LeasedPromotion(promoted, fenced, refused)
