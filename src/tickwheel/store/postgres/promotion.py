"""Promotion on PostgreSQL (SCHEDULED or RETRY_WAIT -> READY): mixed into ``PostgresStore`` (its
pool and signals).

Two ways in, with the same guards. The timing wheel's firing promotes the executions it loaded
by id (``execution_promote_ids*``); the catch-all walks the due indexes up to now
(``execution_promote_due*``). Leased, both are fenced by the shard leases' epochs in the same
transaction, so a scheduler that lost a grant promotes nothing in that shard."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from tickwheel.domain.models import ShardLease
from tickwheel.domain.sharding import bucket_start
from tickwheel.observability.tracing import Traced, now_ns, record_batch, trace_promoted
from tickwheel.store.due import DefinitionKey, DueEntry, DueHints, DueSlice, Promotion
from tickwheel.store.postgres.notify import Signals
from tickwheel.store.postgres.rows import opt_aware, require_aware, utc
from tickwheel.store.protocol import Topic
from tickwheel.store.sqlfile import load_queries, without_comment_lines

Q = load_queries("tickwheel.store.postgres.sql")
FENCED = without_comment_lines(Q["execution_promote_ids_fenced"])
"""The wheel's fenced firing as sent: without its comments it stays under psycopg's cache of
converted queries (4,096 bytes; store/postgres/claims.py says why that matters)."""
FROZEN_LIMIT = "2s"
"""How long a leased promotion's transaction may sit idle before PostgreSQL ends it (and its
session): a scheduler frozen inside one (SIGSTOP, a long GC pause) would otherwise hold its fence's
FOR SHARE locks on the shard rows, and hide those shards from a takeover, for as long as it stays
frozen. Far below any shard lease (10 s by default), far above a promotion's round trips."""
Conn = AsyncConnection[DictRow]


def _grants(owner: str, leases: Sequence[ShardLease], now: datetime | None) -> dict[str, Any]:
    return {
        "owner": owner,
        "shards": [lease.shard_id for lease in leases],
        "epochs": [lease.epoch for lease in leases],
        "now": opt_aware(now),
    }


def fenced_params(
    owner: str,
    shards: list[int],
    epochs: list[int],
    execution_ids: list[uuid.UUID],
    now: datetime | None,
    notification: tuple[str, str],
    direct: bool,
) -> dict[str, Any]:
    """The parameters of ``execution_promote_ids_fenced``, also those of ``warm_promotions``
    (a prepared statement is found again only with the same names and types)."""
    return {
        "owner": owner,
        "shards": shards,
        "epochs": epochs,
        "now": opt_aware(now),
        "execution_ids": execution_ids,
        "channel": notification[0],
        "payload": notification[1],
        "direct": direct,
    }


async def warm_promotions(conn: Conn) -> None:
    """A promotion connection's statements, prepared at its start (``Pool``'s ``warm``) by
    running each as a no-op: an owner that holds no lease fences no shard, so nothing is
    locked, promoted or notified. An instant's first promotion then runs a plan made before the
    instant, on a session that has read its tables' catalog (docs/scaling.md, "The herd's
    prepared connections and its first claim alone"). One shard, epoch and id, never an empty
    list: psycopg keys a prepared statement by its parameters' types, and an empty list has
    none (a scheduler's shard numbers and epochs are ``smallint`` arrays until an epoch passes
    32,767). ``now`` None: the system clock's."""
    nil = [uuid.UUID(int=0)]
    params = fenced_params("", [0], [0], nil, None, ("", ""), False)
    await conn.execute(FENCED, params, prepare=True)
    # Unleased (one scheduler over every shard): its promotion by id; the shard array is of
    # every shard's number, the same type.
    unleased = {"execution_ids": nil, "shards": [0], "now": None}
    await conn.execute(Q["execution_promote_ids"], unleased, prepare=True)


class PostgresPromotion:
    _pool: AsyncConnectionPool[Conn]
    _fire: AsyncConnectionPool[Conn]
    """The pool of the wheel's promotions by id (store.py, ``PROMOTE_CONNECTIONS``)."""
    _signals: Signals

    def due_hints(self) -> DueHints:
        return self._signals.subscribe_due()

    async def execution_due_window(
        self, slices: Sequence[DueSlice], limit: int
    ) -> list[list[DueEntry]]:
        found: list[list[DueEntry]] = [[] for _ in slices]
        if not slices:
            return found
        params = {"slices": due_slices_json(slices), "limit": limit}
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q["execution_due_window"], params)
            rows = await cursor.fetchall()
        # One key object per definition, not per row: the wheel keeps them until the instant.
        keys: dict[DefinitionKey, DefinitionKey] = {}
        for r in rows:
            key = (r["tenant"], r["definition_uri"], int(r["definition_version"]))
            entry = DueEntry(
                r["execution_id"],
                int(r["shard_id"]),
                utc(r["execute_at"]),
                keys.setdefault(key, key),
                key[0],
                int(r["priority"]),
                bool(r["limited"]),
            )
            found[int(r["slice"]) - 1].append(entry)
        return found

    async def execution_promote_ids(
        self, execution_ids: Sequence[uuid.UUID], shards: Sequence[int], now: datetime | None = None
    ) -> Promotion:
        params = {
            "execution_ids": list(execution_ids),
            "shards": list(shards),
            "now": opt_aware(now),
        }
        started, traced = now_ns(), Traced()
        async with self._fire.connection() as conn, conn.transaction():
            moved = await self._run_promotion(conn, ("execution_promote_ids",), params, traced)
            await self._signals.notify(conn, {Topic.READY} if moved else set())
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
        params = fenced_params(
            owner,
            [lease.shard_id for lease in leases],
            [lease.epoch for lease in leases],
            list(execution_ids),
            now,
            self._signals.notification(Topic.READY),
            direct,
        )
        started, traced = now_ns(), Traced()
        # One statement on an autocommit connection: fence, promotion and NOTIFY commit together.
        async with self._fire.connection() as conn:
            cursor = await conn.execute(FENCED, params)
            rows = await cursor.fetchall()
        held: set[int] = set()
        moved: dict[uuid.UUID, str] = {}
        for r in rows:
            if r["shard_id"] is not None:
                held.add(int(r["shard_id"]))
            else:
                moved[r["execution_id"]] = r["definition_uri"]
                trace_promoted(traced, r["execution_id"], r["definition_uri"], r["trace_context"])
        fenced = sorted({lease.shard_id for lease in leases} - held)
        return self._promoted(moved, fenced, traced=traced, started=started)

    async def execution_promote_due(
        self, shards: Sequence[int], limit: int, now: datetime | None = None
    ) -> Promotion:
        params = {"shards": list(shards), "limit": limit, "now": opt_aware(now)}
        started, traced = now_ns(), Traced()
        async with self._pool.connection() as conn, conn.transaction():
            moved = await self._run_promotion(
                conn, ("execution_promote_scheduled", "execution_promote_retries"), params, traced
            )
            await self._signals.notify(conn, {Topic.READY} if moved else set())
        return self._promoted(moved, traced=traced, started=started)

    async def execution_promote_due_leased(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        limit: int,
        now: datetime | None = None,
    ) -> Promotion:
        grants = _grants(owner, leases, now)
        if not await self._due_work(grants):
            return Promotion({}, [], 0)  # nothing due, nothing open: no lock, no write
        started, traced = now_ns(), Traced()
        async with self._pool.connection() as conn, conn.transaction():
            held = await self._fence(conn, grants)
            fenced = sorted({lease.shard_id for lease in leases} - set(held))
            refused = 0
            if fenced:
                params = {"shards": fenced, "now": grants["now"]}
                cursor = await conn.execute(Q["execution_count_due"], params)
                row = await cursor.fetchone()
                refused = int(row["n"]) if row else 0
            moved: dict[uuid.UUID, str] = {}
            if held:
                params = {"shards": held, "limit": limit, "now": grants["now"]}
                scheduled = await self._run_promotion(
                    conn, ("execution_promote_scheduled",), params, traced
                )
                retries = await self._run_promotion(
                    conn, ("execution_promote_retries",), params, traced
                )
                moved = {**scheduled, **retries}
                if len(scheduled) < limit:
                    # Nothing due is left in these shards: the watermark may move to now.
                    await conn.execute(Q["shard_lease_watermark"], {**params, "owner": owner})
            await self._signals.notify(conn, {Topic.READY} if moved else set())
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

    async def _due_work(self, grants: dict[str, Any]) -> bool:
        """Whether the catch-all over the grants' shards has a row to promote or a shard to close
        (``execution_due_work``): an idle scheduler's rounds then lock and write nothing."""
        params = {"shards": grants["shards"], "owner": grants["owner"], "now": grants["now"]}
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q["execution_due_work"], params)
            row = await cursor.fetchone()
        return bool(row and row["work"])

    async def _fence(self, conn: Conn, grants: dict[str, Any]) -> list[int]:
        """First statements of a leased promotion: the shards of the grants still held, locked
        (FOR SHARE) against takeover until the promotion commits, after bounding how long this
        transaction may sit idle (FROZEN_LIMIT), so that a frozen scheduler cannot keep them."""
        await conn.execute(Q["promotion_idle_timeout"], {"timeout": FROZEN_LIMIT})
        cursor = await conn.execute(Q["shard_lease_fence"], grants)
        return [int(r["shard_id"]) for r in await cursor.fetchall()]

    async def _run_promotion(
        self, conn: Conn, queries: Sequence[str], params: dict[str, Any], traced: Traced
    ) -> dict[uuid.UUID, str]:
        moved: dict[uuid.UUID, str] = {}
        for query in queries:
            cursor = await conn.execute(Q[query], params)
            for r in await cursor.fetchall():
                moved[r["execution_id"]] = r["definition_uri"]
                trace_promoted(traced, r["execution_id"], r["definition_uri"], r["trace_context"])
        return moved

    def _promoted(
        self,
        moved: dict[uuid.UUID, str],
        fenced: list[int] | None = None,
        refused: int = 0,
        traced: Traced | None = None,
        started: int = 0,
    ) -> Promotion:
        """The promotion's result, once committed: workers of this process wake at once, and
        the traced executions get their promotion span (docs/tracing.md)."""
        if traced:
            record_batch("tickwheel.promotion", traced, started)
        if moved:
            self._signals.signal({Topic.READY})
        return Promotion(moved, fenced or [], refused)

    async def _next_at(
        self, queries: Sequence[str], shards: Sequence[int], horizon: datetime
    ) -> datetime | None:
        params = {"shards": list(shards), "horizon": require_aware(horizon)}
        found: list[datetime] = []
        async with self._pool.connection() as conn:
            for query in queries:
                cursor = await conn.execute(Q[query], params)
                row = await cursor.fetchone()
                if row is not None and row["at"] is not None:
                    found.append(row["at"])
        return utc(min(found)) if found else None


def due_slices_json(slices: Sequence[DueSlice]) -> str:
    """The ``slices`` parameter of ``execution_due_window``: one positional array per slice
    (shard, after_at, after_id, bucket_from, until), instants with their offset. A scheduler's
    window over its shards is a slice per shard with the same instants (1,024 at its start): each
    instant and id is spelled once, not once per slice (3,000 ``isoformat`` calls were most of
    the Python of a start's window load)."""
    # Keyed with the offset too: equal instants in two zones are spelled each in its own.
    instants: dict[tuple[datetime, timedelta | None], tuple[str, str]] = {}
    ids: dict[uuid.UUID, str] = {}

    def spelled(at: datetime) -> tuple[str, str]:
        """The instant and its bucket's start."""
        key = (at, at.utcoffset())
        found = instants.get(key)
        if found is None:
            found = instants[key] = (
                require_aware(at).isoformat(),
                bucket_start(at).isoformat(),
            )
        return found

    def spelled_id(value: uuid.UUID) -> str:
        found = ids.get(value)
        if found is None:
            found = ids[value] = str(value)
        return found

    items = []
    for c in slices:
        after, bucket_from = spelled(c.after_at)
        items.append([c.shard_id, after, spelled_id(c.after_id), bucket_from, spelled(c.until)[0]])
    return json.dumps(items, separators=(",", ":"))
