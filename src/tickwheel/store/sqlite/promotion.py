"""Promotion on SQLite (SCHEDULED or RETRY_WAIT -> READY): mixed into ``SqliteStore`` (its
connection, lock, events and due-hint fan-out).

The same two ways in as on PostgreSQL: the wheel's firing by id and the catch-all over the due
indexes, each fenced by the shard leases when leased. SQLite has one writer at a time
(``BEGIN IMMEDIATE``), so the fence and the promotion share a write transaction and no takeover
can commit in between. Due hints stay in this process: a scheduler in another process on the
same file learns of new executions at its next window load."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import aiosqlite

from tickwheel.domain.models import Execution, ShardLease
from tickwheel.domain.sharding import bucket_start
from tickwheel.observability.tracing import Traced, now_ns, record_batch, trace_promoted
from tickwheel.store.due import (
    DefinitionKey,
    DueEntry,
    DueFanout,
    DueHints,
    DueSlice,
    Promotion,
    hint_pairs,
)
from tickwheel.store.protocol import Topic
from tickwheel.store.sqlfile import load_queries
from tickwheel.store.sqlite.codec import from_us, to_us
from tickwheel.store.sqlite.connection import SqliteConnection

Q = load_queries("tickwheel.store.sqlite.sql")


def _now_us(now: datetime | None) -> int:
    return to_us(now or datetime.now(UTC))


def _grants(leases: Sequence[ShardLease]) -> str:
    return json.dumps([[lease.shard_id, lease.epoch] for lease in leases])


class SqlitePromotion(SqliteConnection):
    _events: dict[Topic, asyncio.Event]
    _due: DueFanout

    def due_hints(self) -> DueHints:
        return self._due.subscribe()

    def _signal_due(self, inserted: Sequence[Execution]) -> None:
        """After an insert committed: hints to this process's schedulers, then the wake-up."""
        self._due.publish(hint_pairs(inserted))
        self._due.poke()
        self._events[Topic.DUE].set()

    async def execution_due_window(
        self, slices: Sequence[DueSlice], limit: int
    ) -> list[list[DueEntry]]:
        found: list[list[DueEntry]] = [[] for _ in slices]
        if not slices:
            return found
        spec = [
            [
                c.shard_id,
                to_us(c.after_at),
                str(c.after_id),
                to_us(bucket_start(c.after_at)),
                to_us(c.until),
            ]
            for c in slices
        ]
        params = {"slices": json.dumps(spec), "limit": limit}
        keys: dict[DefinitionKey, DefinitionKey] = {}
        for r in await self._all("execution_due_window", params):
            key = (r["tenant"], r["definition_uri"], int(r["definition_version"]))
            entry = DueEntry(
                uuid.UUID(r["execution_id"]),
                int(r["shard_id"]),
                from_us(r["execute_at"]),
                keys.setdefault(key, key),
                key[0],
                int(r["priority"]),
                bool(r["limited"]),
            )
            found[int(r["slice"])].append(entry)
        return found

    async def execution_promote_ids(
        self, execution_ids: Sequence[uuid.UUID], shards: Sequence[int], now: datetime | None = None
    ) -> Promotion:
        params = {
            "execution_ids": json.dumps([str(i) for i in execution_ids]),
            "shards": json.dumps(list(shards)),
            "now": _now_us(now),
            "direct": 0,
        }
        started, traced = now_ns(), Traced()
        async with self._tx() as conn:
            moved = await _run(conn, ("execution_promote_ids",), params, traced)
        return self._promoted(moved, traced=traced, started=started)

    async def execution_promote_ids_leased(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        execution_ids: Sequence[uuid.UUID],
        now: datetime | None = None,
        *,
        direct: bool = False,
    ) -> Promotion:
        now_us = _now_us(now)
        started, traced = now_ns(), Traced()
        async with self._tx() as conn:
            held = await _fence(conn, owner, leases, now_us)
            moved: dict[uuid.UUID, str] = {}
            if held:
                params = {
                    "execution_ids": json.dumps([str(i) for i in execution_ids]),
                    "shards": json.dumps(held),
                    "now": now_us,
                    "direct": int(direct),
                }
                moved = await _run(conn, ("execution_promote_ids",), params, traced)
        fenced = sorted({lease.shard_id for lease in leases} - set(held))
        return self._promoted(moved, fenced, traced=traced, started=started)

    async def execution_promote_due(
        self, shards: Sequence[int], limit: int, now: datetime | None = None
    ) -> Promotion:
        params = {"shards": json.dumps(list(shards)), "limit": limit, "now": _now_us(now)}
        started, traced = now_ns(), Traced()
        async with self._tx() as conn:
            moved = await _run(
                conn, ("execution_promote_scheduled", "execution_promote_retries"), params, traced
            )
        return self._promoted(moved, traced=traced, started=started)

    async def execution_promote_due_leased(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        limit: int,
        now: datetime | None = None,
    ) -> Promotion:
        now_us = _now_us(now)
        if not await self._due_work(owner, leases, now_us):
            return Promotion({}, [], 0)  # nothing due, nothing open: no write transaction
        started, traced = now_ns(), Traced()
        async with self._tx() as conn:
            held = await _fence(conn, owner, leases, now_us)
            fenced = sorted({lease.shard_id for lease in leases} - set(held))
            refused = 0
            if fenced:
                params = {"shards": json.dumps(fenced), "now": now_us}
                cursor = await conn.execute(Q["execution_count_due"], params)
                row = await cursor.fetchone()
                refused = int(row["n"]) if row else 0
            moved: dict[uuid.UUID, str] = {}
            if held:
                params = {"shards": json.dumps(held), "limit": limit, "now": now_us, "owner": owner}
                scheduled = await _run(conn, ("execution_promote_scheduled",), params, traced)
                retries = await _run(conn, ("execution_promote_retries",), params, traced)
                moved = {**scheduled, **retries}
                if len(scheduled) < limit:
                    # Nothing due is left in these shards: the watermark may move to now.
                    await conn.execute(Q["shard_lease_watermark"], params)
        return self._promoted(moved, fenced, refused, traced, started)

    async def execution_next_due_at(
        self, shards: Sequence[int], horizon: datetime
    ) -> datetime | None:
        return await self._next_at(
            ("execution_next_scheduled_at", "execution_next_retry_at"), shards, horizon
        )

    async def execution_next_retry_at(
        self, shards: Sequence[int], horizon: datetime
    ) -> datetime | None:
        return await self._next_at(("execution_next_retry_at",), shards, horizon)

    # -- internals ----------------------------------------------------------------------------

    def _promoted(
        self,
        moved: dict[uuid.UUID, str],
        fenced: list[int] | None = None,
        refused: int = 0,
        traced: Traced | None = None,
        started: int = 0,
    ) -> Promotion:
        if traced:  # after the commit: a promotion span only for what was promoted
            record_batch("tickwheel.promotion", traced, started)
        if moved:
            self._events[Topic.READY].set()
        return Promotion(moved, fenced or [], refused)

    async def _due_work(self, owner: str, leases: Sequence[ShardLease], now_us: int) -> bool:
        """Whether the catch-all over the leases' shards has a row to promote or a shard to
        close (``execution_due_work``): an idle scheduler's rounds then write nothing."""
        shards = json.dumps([lease.shard_id for lease in leases])
        params = {"shards": shards, "owner": owner, "now": now_us}
        async with self._lock:
            cursor = await self._conn.execute(Q["execution_due_work"], params)
            row = await cursor.fetchone()
        return bool(row and row["work"])

    async def _next_at(
        self, queries: Sequence[str], shards: Sequence[int], horizon: datetime
    ) -> datetime | None:
        params = {"shards": json.dumps(list(shards)), "horizon": to_us(horizon)}
        found: list[int] = []
        async with self._lock:
            for query in queries:
                cursor = await self._conn.execute(Q[query], params)
                row = await cursor.fetchone()
                if row is not None and row["at"] is not None:
                    found.append(int(row["at"]))
        return from_us(min(found)) if found else None


async def _fence(
    conn: aiosqlite.Connection, owner: str, leases: Sequence[ShardLease], now_us: int
) -> list[int]:
    """Inside the promotion's write transaction: the shards of the grants still held."""
    params = {"owner": owner, "grants": _grants(leases), "now": now_us}
    cursor = await conn.execute(Q["shard_lease_fence"], params)
    return [int(r["shard_id"]) for r in await cursor.fetchall()]


async def _run(
    conn: aiosqlite.Connection, queries: Sequence[str], params: dict[str, Any], traced: Traced
) -> dict[uuid.UUID, str]:
    moved: dict[uuid.UUID, str] = {}
    for query in queries:
        cursor = await conn.execute(Q[query], params)
        rows: list[sqlite3.Row] = list(await cursor.fetchall())
        for r in rows:
            execution_id, uri = uuid.UUID(r["execution_id"]), str(r["definition_uri"])
            moved[execution_id] = uri
            trace_promoted(traced, execution_id, uri, r["trace_context"])
    return moved
