"""Rate limits on PostgreSQL (issue 14): mixed into ``PostgresStore``; queries in
``sql/rate_limits.sql``. The claim's rate step (``claim_rated``) runs in one transaction under the
buckets' row locks, so that claimers in every process draw on one budget; the arithmetic is
``domain.rate_limits``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from tickwheel.domain.rate_limits import (
    Bucket,
    BucketState,
    Candidate,
    RateLimitSpec,
    allocate,
    draw,
    lanes,
    refilled,
    sync_action,
)
from tickwheel.store.postgres.queries import PostgresQueries
from tickwheel.store.postgres.rows import opt_aware
from tickwheel.store.protocol import Topic
from tickwheel.store.sqlfile import load_queries

Q = load_queries("tickwheel.store.postgres.sql")
Conn = AsyncConnection[DictRow]

RATES_RECHECK = 1.0
"""Seconds a store trusts its last look at whether any bucket exists. While it believes none
does, rows under a bucket are passed over by the claim (never started without a token): a
bucket made by another process is honoured at once and its work claimed within this delay."""


def spec_of(row: DictRow) -> RateLimitSpec:
    return RateLimitSpec(int(row["rate_limit"]), float(row["period_seconds"]), int(row["burst"]))


def bucket_of(row: DictRow) -> Bucket:
    spec = spec_of(row)
    tokens = refilled(float(row["tokens"]), spec.capacity, spec.per_second, float(row["elapsed"]))
    return Bucket(row["tenant"], row["definition_uri"], spec, tokens)


class PostgresRateLimits(PostgresQueries):
    _tx: Callable[[], AbstractAsyncContextManager[Conn]]
    _signalling_tx: Callable[[], AbstractAsyncContextManager[tuple[Conn, set[Topic]]]]
    _rates_checked: float = -1e9
    """When (time.monotonic) this store last looked whether any bucket exists."""
    _rates_present: bool = False
    _rates_synced: set[tuple[str, str, int]] | None = None

    async def rates_present(self, conn: Conn) -> bool:
        """Whether the rate step should run: a look at the table at most every RATES_RECHECK."""
        at = time.monotonic()
        if at - self._rates_checked >= RATES_RECHECK:
            cursor = await conn.execute(Q["rate_limit_exists"])
            row = await cursor.fetchone()
            self._rates_present = bool(row and row["present"])
            self._rates_checked = at
        return self._rates_present

    def rates_changed(self) -> None:
        self._rates_checked = -1e9

    async def claim_rated(
        self, conn: Conn, params: dict[str, Any], claim_sql: str
    ) -> tuple[list[DictRow], float | None]:
        """The rate step of a claim: the rows under a bucket that may start now, claimed through
        ``claim_sql`` (naming them), and the seconds until an empty bucket's next token."""
        async with conn.transaction():
            cursor = await conn.execute(Q["rate_limit_lock"], {"now": params["now"]})
            buckets = [bucket_of(r) for r in await cursor.fetchall()]
            if not buckets:
                return [], None
            rows: list[DictRow] = []
            open_lanes = lanes(buckets)
            if open_lanes:
                cursor = await conn.execute(
                    Q["rate_limit_candidates"],
                    {
                        "lanes": json.dumps(open_lanes),
                        "limit": params["limit"],
                        "definition_uris": params["definition_uris"],
                    },
                )
                found = [
                    Candidate(r["execution_id"], r["tenant"], r["definition_uri"])
                    for r in await cursor.fetchall()
                ]
                chosen = allocate(buckets, found, params["limit"])
                if chosen:
                    named = {**params, "limit": len(chosen), "rate_ids": chosen}
                    cursor = await conn.execute(claim_sql, named, prepare=False)
                    rows = list(await cursor.fetchall())
            drawn = draw(buckets, ((r["tenant"], r["definition_uri"]) for r in rows))
            if drawn.tokens:
                taken = [
                    {"tenant": t, "definition_uri": u, "tokens": n}
                    for (t, u), n in sorted(drawn.tokens.items())
                ]
                await conn.execute(
                    Q["rate_limit_take"], {"taken": json.dumps(taken), "now": params["now"]}
                )
        return rows, drawn.retry_after

    async def rate_limit_set(
        self,
        tenant: str,
        definition_uri: str,
        spec: RateLimitSpec,
        definition_version: int | None,
        now: datetime | None = None,
    ) -> None:
        params = {
            "tenant": tenant,
            "definition_uri": definition_uri,
            "rate_limit": spec.limit,
            "period_seconds": spec.period,
            "burst": spec.capacity,
            "definition_version": definition_version,
            "now": opt_aware(now),
        }
        async with self._signalling_tx() as (conn, topics):
            await conn.execute(Q["rate_limit_set"], params)
            topics.add(Topic.READY)  # a larger budget may let waiting work start now
        self.rates_changed()

    def rate_limit_synced(self, tenant: str, definition_uri: str, version: int) -> bool:
        synced = self._rates_synced
        return synced is not None and (tenant, definition_uri, version) in synced

    async def rate_limit_sync(
        self,
        tenant: str,
        definition_uri: str,
        version: int,
        spec: RateLimitSpec | None,
        now: datetime | None = None,
    ) -> None:
        if self._rates_synced is None:
            self._rates_synced = set()
        key = (tenant, definition_uri, version)
        if key in self._rates_synced:
            return
        params = {"tenant": tenant, "definition_uri": definition_uri}
        row = await self._one("rate_limit_get", params)
        stored = None if row is None else _settings(row)
        action = sync_action(stored, version, spec)
        if action == "drop":
            async with self._tx() as conn:
                await conn.execute(
                    Q["rate_limit_drop_definition"], {**params, "definition_version": version}
                )
        elif action == "set" and spec is not None:
            await self.rate_limit_set(tenant, definition_uri, spec, version, now)
        self._rates_synced.add(key)

    async def rate_limit_clear(self, tenant: str, definition_uri: str) -> bool:
        async with self._signalling_tx() as (conn, topics):
            params = {"tenant": tenant, "definition_uri": definition_uri}
            cursor = await conn.execute(Q["rate_limit_clear"], params)
            if cursor.rowcount:
                topics.add(Topic.READY)  # what the limit held back is claimable now
        self.rates_changed()
        return bool(cursor.rowcount)

    async def rate_limit_list(
        self, tenant: str | None, now: datetime | None = None
    ) -> list[BucketState]:
        if tenant is None:
            rows = await self._all("rate_limit_all", {"now": opt_aware(now)})
        else:
            rows = await self._all("rate_limit_list", {"tenant": tenant, "now": opt_aware(now)})
        return [_state(r) for r in rows]

    async def rate_limit_waiting(self) -> dict[str, int]:
        return {r["definition_uri"]: int(r["n"]) for r in await self._all("rate_limit_waiting", {})}

    async def tenant_weight_set(self, tenant: str, weight: int | None) -> None:
        async with self._tx() as conn:
            if weight is None:
                await conn.execute(Q["tenant_weight_clear"], {"tenant": tenant})
            else:
                await conn.execute(Q["tenant_weight_set"], {"tenant": tenant, "weight": weight})

    async def tenant_weight_get(self, tenant: str) -> int:
        row = await self._one("tenant_weight_get", {"tenant": tenant})
        return 1 if row is None else int(row["weight"])


def _state(row: DictRow) -> BucketState:
    b = bucket_of(row)
    version = row["definition_version"]
    return BucketState(
        b.tenant,
        b.definition_uri,
        b.spec,
        b.tokens,
        row["at"],
        None if version is None else int(version),
    )


__all__: Sequence[str] = ("PostgresRateLimits",)


def _settings(row: Any) -> tuple[int, float, int, int | None]:
    version = row["definition_version"]
    return (
        int(row["rate_limit"]),
        float(row["period_seconds"]),
        int(row["burst"]),
        None if version is None else int(version),
    )
