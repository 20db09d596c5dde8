"""Rate limits on SQLite (issue 14): mixed into ``SqliteStore``; queries in
``sql/rate_limits.sql``. The claim's rate step (``claim_rated``) runs inside the claim's write
transaction, which serialises it with every other claimer; the arithmetic is
``domain.rate_limits``."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import aiosqlite

from tickwheel.domain.errors import Unavailable
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
from tickwheel.store.protocol import Topic
from tickwheel.store.sqlfile import load_queries
from tickwheel.store.sqlite.codec import from_us, to_us
from tickwheel.store.sqlite.connection import SqliteConnection

Q = load_queries("tickwheel.store.sqlite.sql")

RATES_RECHECK = 1.0
"""Seconds a store trusts its last look at whether any bucket exists (as on PostgreSQL): rows
under a bucket are passed over by the claim meanwhile, never started without a token."""

_log = logging.getLogger(__name__)

Claim = Callable[[aiosqlite.Connection, str, dict[str, Any]], Awaitable[list[sqlite3.Row]]]


def _bucket(row: sqlite3.Row) -> Bucket:
    spec = RateLimitSpec(int(row["rate_limit"]), float(row["period_seconds"]), int(row["burst"]))
    tokens = refilled(float(row["tokens"]), spec.capacity, spec.per_second, float(row["elapsed"]))
    return Bucket(row["tenant"], row["definition_uri"], spec, tokens)


class SqliteRateLimits(SqliteConnection):
    _signal: Callable[[Topic], None]
    _rates_checked: float = -1e9
    _rates_present: bool = False
    _rates_synced: set[tuple[str, str, int]] | None = None

    def rates_changed(self) -> None:
        self._rates_checked = -1e9

    async def claim_rated(
        self, conn: aiosqlite.Connection, params: dict[str, Any], claim: Claim
    ) -> tuple[list[sqlite3.Row], float | None]:
        """The rate step of a claim, in its write transaction: the rows under a bucket that may
        start now, claimed by ``claim`` (naming them), and the seconds until an empty bucket's
        next token."""
        at = time.monotonic()
        if at - self._rates_checked >= RATES_RECHECK:
            cursor = await conn.execute(Q["rate_limit_exists"])
            row = await cursor.fetchone()
            self._rates_present = bool(row and row["present"])
            self._rates_checked = at
        if not self._rates_present:
            return [], None
        cursor = await conn.execute(Q["rate_limit_lock"], {"now": params["now"]})
        buckets = [_bucket(r) for r in await cursor.fetchall()]
        if not buckets:
            return [], None
        found: list[sqlite3.Row] = []
        for lane in lanes(buckets):
            cursor = await conn.execute(
                Q["rate_limit_candidates"],
                {
                    "tenant": lane["tenant"],
                    "definition_uri": lane["definition_uri"],
                    "exclude": json.dumps(lane["exclude"]),
                    "definition_uris": params["definition_uris"],
                    "limit": params["limit"],
                },
            )
            found += await cursor.fetchall()
        # Claim order across lanes (each lane's rows came in it): the allocation goes by it.
        found.sort(key=lambda r: (-r["priority"], r["ready_at"]))
        candidates = [Candidate(r["execution_id"], r["tenant"], r["definition_uri"]) for r in found]
        rows: list[sqlite3.Row] = []
        chosen = allocate(buckets, candidates, params["limit"])
        if chosen:
            named = {**params, "limit": len(chosen), "rate_ids": json.dumps(chosen)}
            rows = await claim(conn, Q["execution_claim_ready"], named)
        drawn = draw(buckets, ((r["tenant"], r["definition_uri"]) for r in rows))
        for (tenant, uri), tokens in sorted(drawn.tokens.items()):
            await conn.execute(
                Q["rate_limit_take"],
                {"tenant": tenant, "definition_uri": uri, "tokens": tokens, "now": params["now"]},
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
            "now": to_us(now or datetime.now(UTC)),
        }
        async with self._tx() as conn:
            await conn.execute(Q["rate_limit_set"], params)
        self.rates_changed()
        self._signal(Topic.READY)  # a larger budget may let waiting work start now

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
        try:
            if action == "drop":
                async with self._tx() as conn:
                    await conn.execute(
                        Q["rate_limit_drop_definition"], {**params, "definition_version": version}
                    )
            elif action == "set" and spec is not None:
                await self.rate_limit_set(tenant, definition_uri, spec, version, now)
        except Unavailable:
            # A submission inside the caller's own write transaction (tickwheel.connect) on the
            # same file: the bucket cannot be written now. The next submission tries again;
            # until then this definition version's executions start without its limit.
            _log.warning(
                "rate limit of %s for %s not written (the database is busy): next submission",
                definition_uri,
                tenant,
            )
            return
        self._rates_synced.add(key)

    async def rate_limit_clear(self, tenant: str, definition_uri: str) -> bool:
        async with self._tx() as conn:
            params = {"tenant": tenant, "definition_uri": definition_uri}
            cursor = await conn.execute(Q["rate_limit_clear"], params)
        self.rates_changed()
        if cursor.rowcount:
            self._signal(Topic.READY)  # what the limit held back is claimable now
        return bool(cursor.rowcount)

    async def rate_limit_list(
        self, tenant: str | None, now: datetime | None = None
    ) -> list[BucketState]:
        at = now or datetime.now(UTC)
        if tenant is None:
            rows = await self._all("rate_limit_all", {"now": to_us(at)})
        else:
            rows = await self._all("rate_limit_list", {"tenant": tenant, "now": to_us(at)})
        answer = []
        for r in rows:
            b = _bucket(r)
            version = r["definition_version"]
            answer.append(
                BucketState(
                    b.tenant,
                    b.definition_uri,
                    b.spec,
                    b.tokens,
                    from_us(to_us(at)),
                    None if version is None else int(version),
                )
            )
        return answer

    async def rate_limit_waiting(self) -> dict[str, int]:
        return {r["definition_uri"]: int(r["n"]) for r in await self._all("rate_limit_waiting", {})}

    async def tenant_weight_set(self, tenant: str, weight: int | None) -> None:
        async with self._tx() as conn:
            if weight is None:
                await conn.execute(Q["tenant_weight_clear"], {"tenant": tenant})
            else:
                params = {"tenant": tenant, "weight": weight, "now": to_us(datetime.now(UTC))}
                await conn.execute(Q["tenant_weight_set"], params)

    async def tenant_weight_get(self, tenant: str) -> int:
        row = await self._one("tenant_weight_get", {"tenant": tenant})
        return 1 if row is None else int(row["weight"])


def _settings(row: Any) -> tuple[int, float, int, int | None]:
    version = row["definition_version"]
    return (
        int(row["rate_limit"]),
        float(row["period_seconds"]),
        int(row["burst"]),
        None if version is None else int(version),
    )
