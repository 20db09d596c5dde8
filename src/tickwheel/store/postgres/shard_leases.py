"""Shard leases on PostgreSQL: mixed into ``PostgresStore`` (its pool and signals).

The database's clock decides every lease (``now`` is None in production), so a scheduler whose
own clock is skewed can neither keep a lease past its expiry nor take one early."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from tickwheel.domain.models import ShardLease
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.store.postgres.notify import Signals
from tickwheel.store.postgres.rows import opt_aware, require_aware
from tickwheel.store.protocol import Topic
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


UNPREPARED = False
"""How the renewal and the release are sent: never prepared, so planned at every run with the
grants' arrays as constants. psycopg prepares a statement at a connection's fifth run, and the
main pool's sessions then kept a generic plan, where the arrays are parameters read at every
lease row: ``shard_id = ANY (shards)`` a linear search of the grants for each row, instead of a
lookup in a hash made once. 7.6-8.5 ms of the database's CPU a renewal of 512 leases, against
1.5 ms planned with constants, the planning included; every 3.3 s in every scheduler, it was
most of an idle system's database CPU (docs/scaling.md, "The renewal planned with its
grants")."""


def epoch_of(leases: Sequence[ShardLease]) -> list[int | None]:
    """The ``epoch_of`` parameter: each grant's epoch at its shard's place (shard_id + 1 in
    SQL), None for the shards not granted here, so a statement finds a row's grant without a
    join (shard_lease_renew says why)."""
    epochs: list[int | None] = [None] * SHARD_COUNT
    for lease in leases:
        epochs[lease.shard_id] = lease.epoch
    return epochs


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
        params = {**_grants(owner, leases, now), "ttl": ttl, "epoch_of": epoch_of(leases)}
        async with self._pool.connection() as conn:  # one statement: membership and leases
            cursor = await conn.execute(Q["shard_lease_renew"], params, prepare=UNPREPARED)
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
        params = {**_grants(owner, leases, now), "epoch_of": epoch_of(leases)}
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(Q["shard_lease_release"], params, prepare=UNPREPARED)
            if leaving:
                await conn.execute(Q["shard_owner_leave"], params)

    async def shard_lease_counts(self, now: datetime | None = None) -> dict[str, int]:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q["shard_lease_counts"], {"now": opt_aware(now)})
            return {str(r["owner"]): int(r["n"]) for r in await cursor.fetchall()}

    async def shard_lease_open(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        through: datetime,
        now: datetime | None = None,
    ) -> list[int]:
        channel, payload = self._signals.notification(Topic.READY)
        params = {
            **_grants(owner, leases, now),
            "through": require_aware(through),
            "channel": channel,
            "payload": payload,
        }
        # One autocommit statement: the fenced UPDATE and the READY notification commit together.
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q["shard_lease_open"], params)
            held = [int(r["shard_id"]) for r in await cursor.fetchall()]
        if held:
            self._signals.signal({Topic.READY})  # this process's workers, without a round trip
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
        params = {
            **_grants(owner, leases, now),
            "through": require_aware(through),
            "counted": [counted is None or lease.shard_id in counted for lease in leases],
        }
        # One autocommit statement: the count, the fenced locks and the close (a CTE).
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q["shard_lease_grace"], params)
            row = await cursor.fetchone()
        if row is None:
            return 0, []
        return int(row["left"]), [int(s) for s in row["closed"]]
