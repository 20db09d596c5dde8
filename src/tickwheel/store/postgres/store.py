"""The PostgreSQL store: production, any number of processes on one database.

A pool of autocommit connections: a single-statement method is its own transaction; methods of
several statements open one explicitly. Isolation is READ COMMITTED throughout; correctness
under concurrency comes from the statements themselves (unique constraint, ``FOR UPDATE SKIP
LOCKED``, status and fencing-token guards), never from a check made in Python first."""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from tickwheel.domain.models import (
    Execution,
    ExecutionEventKind,
    ExecutionFilter,
)
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.domain.submission import NewExecution
from tickwheel.store.due import hint_pairs
from tickwheel.store.engine_protocol import RELEASED_AT_SHUTDOWN
from tickwheel.store.postgres.api_keys import PostgresApiKeys
from tickwheel.store.postgres.caller_tx import PostgresCallerTx
from tickwheel.store.postgres.chunked_insert import insert_chunks
from tickwheel.store.postgres.claims import PostgresClaims, warm_claims
from tickwheel.store.postgres.definitions import PostgresDefinitions
from tickwheel.store.postgres.flow import PostgresFlow
from tickwheel.store.postgres.history import PostgresHistory
from tickwheel.store.postgres.migrating import MIGRATIONS as MIGRATIONS
from tickwheel.store.postgres.migrating import PostgresMigrations
from tickwheel.store.postgres.notify import Signals, topics_for, topics_of
from tickwheel.store.postgres.outbox import webhook_outbox_execution_failed, workflow_event_record
from tickwheel.store.postgres.pool import Conn, Pool
from tickwheel.store.postgres.promotion import PostgresPromotion, warm_promotions
from tickwheel.store.postgres.rows import (
    INSERT_ONE,
    execution_from_new,
    execution_from_row,
    in_lock_order,
    insert_items,
    insert_outcomes,
    insert_statement,
    jsonb,
    like_prefix,
    one_params,
    opt_aware,
    pairs_text,
    require_aware,
)
from tickwheel.store.postgres.running import PostgresRunning
from tickwheel.store.postgres.shard_leases import PostgresShardLeases
from tickwheel.store.postgres.submit_lane import SubmitLane, first_uuid
from tickwheel.store.postgres.submit_lanes import SubmitLanes, lane_count
from tickwheel.store.postgres.workers import PostgresWorkerRegistry
from tickwheel.store.protocol import AttemptResult, InsertOutcome, Topic
from tickwheel.store.sqlfile import load_queries

Q = load_queries("tickwheel.store.postgres.sql")
HOT_CONNECTIONS = 2
"""Connections of the hot pool: a worker's claims and its result flushes, each one at a time."""
HOT_PLANNER = (
    "-c enable_bitmapscan=off -c enable_seqscan=off"
    " -c plan_cache_mode=force_generic_plan -c jit=off"
)
"""The planner settings of the hot pool's sessions, which run the claim and the finish. Both
walk an index to a small batch, and the only plans that do not are the ones to refuse: a table
never analyzed (a new database, a truncated table) prices `status = 'READY'` at 0.5 % of the
rows, and the planner then read every READY row through a bitmap and sorted them on each claim
(3 to 14 ms a claim of 16 with 7,000 READY instead of 0.7 to 1.5 ms; the database's CPU per
execution of a drain 0.44-0.49 ms instead of 0.16-0.18, docs/scaling.md). A session setting
costs nothing per statement; `SET LOCAL` in a pipelined transaction cost 0.7 ms a claim.

Generic plans: the prepared claim was planned again at every run (PostgreSQL kept choosing a
custom plan, whose LIMIT it can see), 0.5-0.7 ms of planning a claim. Planned once per session
now. A generic plan prices ``LIMIT $n`` at a tenth of the rows, but with no sequential scan and
no bitmap the only way to a batch in claim order is still the ordered walk of the READY index,
then the primary key (tests/store/test_plans_generic.py, with statistics that see a million
READY rows). The setting also covers the statements sent unprepared with parameters (the fair
claim, the rate step): the same walks, checked there too. ``jit=off``: the same generic cost
(a tenth of a large READY count) passes ``jit_above_cost``, and compiling the claim took ~300
ms at every run; no statement of a batch gains from JIT."""

PROMOTE_CONNECTIONS = 2
"""Connections of the promotion pool, a scheduler's: the wheel's promotions by id, an instant's
first batch on one and the rest on two at once (the scheduler's ``PROMOTE_LANES``). Opened at
the start with the promotions prepared (``warm_promotions``) and the hot sessions' planner
settings, under which the promotion's plan is made once per session: on the main pool an
instant's first promotion was planned at every run and was often the first of its session
(docs/scaling.md, "The herd's prepared connections and its first claim alone")."""


@functools.cache
def list_merged(statuses: frozenset[ExecutionStatus]) -> str:
    """execution_list_merged with one page per status of ``statuses``, in the enum's order (one
    text per set of statuses, so psycopg prepares each once)."""
    pages = []
    for status in ExecutionStatus:
        if status in statuses:
            # Put into the text as a literal: a status is a word, which needs no escaping.
            if not re.fullmatch(r"[A-Z_]+", status):  # pragma: no cover - a new status's name
                raise ValueError(f"status {status!r} is not a word")
            pages.append(Q["execution_list_status_page"].format(status=f"'{status}'"))
    return Q["execution_list_merged"].format(pages="\nUNION ALL ".join(pages))


class PostgresStore(
    PostgresMigrations,
    PostgresClaims,
    PostgresPromotion,
    PostgresWorkerRegistry,
    PostgresShardLeases,
    PostgresDefinitions,
    PostgresHistory,
    PostgresApiKeys,
    PostgresCallerTx,
    PostgresRunning,
    PostgresFlow,
):
    dialect = "postgresql"

    def __init__(
        self,
        pool: AsyncConnectionPool[Conn],
        url: str,
        hot: AsyncConnectionPool[Conn] | None = None,
        fire: AsyncConnectionPool[Conn] | None = None,
    ) -> None:
        self._pool = pool
        self._hot = hot if hot is not None else pool
        self._fire = fire if fire is not None else pool
        self._signals = Signals(url)
        # Single submissions' own connections (submit_lanes.py); our Pool only, which lends them.
        self._lanes = (
            SubmitLanes(pool, INSERT_ONE, first_uuid, lane_count(pool.max_size))
            if isinstance(pool, Pool)
            else None
        )
        self._lane: SubmitLane | None = self._lanes.first if self._lanes else None

    @property
    def pool(self) -> AsyncConnectionPool[Conn]:
        """The connection pool, shared with stores of other services' tables (cron)."""
        return self._pool

    @property
    def signals(self) -> Signals:
        """This store's LISTEN/NOTIFY, shared with the cron tables' store (its wake-ups)."""
        return self._signals

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        max_size: int = 10,
        min_size: int = 1,
        timeout: float = 30.0,
        claims: bool = False,
        promotes: bool = False,
    ) -> PostgresStore:
        """Opens the pool and waits for its first ``min_size`` connections, so a wrong URL or an
        unreachable server fails here rather than on the first query. ``claims`` (a process
        with a worker): both hot connections connect from now on, in the background, and
        prepare the claims and the finish (``warm_claims``), instead of on a herd's path;
        otherwise on a first claim, so an API-only server never opens them. ``promotes`` (a
        process with a scheduler): the wheel's promotions get connections of their own,
        likewise made now and prepared (``PROMOTE_CONNECTIONS``); otherwise the main pool's."""
        pool = Pool(url, min_size=min(min_size, max_size), max_size=max_size, timeout=timeout)
        hot = Pool(
            url,
            min_size=HOT_CONNECTIONS if claims else 0,
            max_size=HOT_CONNECTIONS,
            timeout=timeout,
            options=HOT_PLANNER,
            warm=warm_claims if claims else None,
        )
        fire = (
            Pool(
                url,
                min_size=PROMOTE_CONNECTIONS,
                max_size=PROMOTE_CONNECTIONS,
                timeout=timeout,
                options=HOT_PLANNER,
                warm=warm_promotions,
            )
            if promotes
            else None
        )
        try:
            # Not waited for: the main pool's connection alone says whether the database is
            # there, as before, and a first claim (promotion) waits for the hot one if it must.
            await hot.open(wait=False)
            if fire is not None:
                await fire.open(wait=False)
            await pool.open(wait=True, timeout=timeout)
        except BaseException:
            await pool.close()
            await hot.close()
            if fire is not None:
                await fire.close()
            raise
        return cls(pool, url, hot, fire)

    async def close(self) -> None:
        await self._signals.close()
        if self._lanes is not None:
            await self._lanes.close()
        await self._pool.close()
        for extra in (self._hot, self._fire):
            if extra is not self._pool:
                await extra.close()

    async def ping(self) -> None:
        async with self._pool.connection() as conn:
            await conn.execute("SELECT 1")

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[Conn]:
        async with self._pool.connection() as conn, conn.transaction():
            yield conn

    @asynccontextmanager
    async def _signalling_tx(self) -> AsyncIterator[tuple[Conn, set[Topic]]]:
        """A transaction that NOTIFYs the topics its body added to the set (delivered with the
        commit, so never for a change rolled back) and, once committed, signals them in this
        process too."""
        topics: set[Topic] = set()
        async with self._tx() as conn:
            yield conn, topics
            await self._signals.notify(conn, topics)
        self._signals.signal(topics)

    # -- executions -----------------------------------------------------------------------------

    async def execution_insert_one(self, item: NewExecution) -> InsertOutcome:
        """``execution_insert_many([item])``'s outcome by a path of its own: the same statement,
        parameters, wake-ups and signals, without what a batch needs and one item does not (the
        sets of statuses and topics, the lock order, the rows' ids, a list per step). Every
        single submission takes it, so that what is left of its cost is the item's own
        (docs/scaling.md, "A single submission's own path")."""
        status = item.status
        due = hint_pairs((item,)) if status is ExecutionStatus.SCHEDULED else []
        params = one_params(item)
        if params is None:  # a text a parameter cannot hold: the JSON row, as in a batch
            inserted, _, _, _ = await self._insert((item,))
        else:
            params["notify"] = self._signals.insert_notifications_of(status, due)
            lanes = self._lanes
            # On a lane's connection unless all are busy (submit_lanes.py), else the pool's.
            count = None if lanes is None else await lanes.count(params)
            inserted = await self._insert_pooled(INSERT_ONE, params) if count is None else count
        if not inserted:
            # Its key holds another execution (a repeat, or a competitor's insert).
            return insert_outcomes((item,), (), await self._holding_keys((item,)))[0]
        execution = execution_from_new(item)
        self._signals.signal(topics_of(status), hint_pairs((execution,)) if due else ())
        return InsertOutcome(execution, created=True)

    async def execution_insert_many(self, items: Sequence[NewExecution]) -> list[InsertOutcome]:
        if len(items) == 1:  # the single submission's path, whoever makes it
            return [await self.execution_insert_one(items[0])]
        if not items:
            return []
        count, rows, statuses, due = await self._insert(items)
        if count == len(items):
            # Every item was inserted (each id returned is one of the items', all distinct):
            # none to look up among them, and the statuses and hints are the items'.
            inserted = [execution_from_new(i) for i in items]
            topics = topics_for(statuses)
            hints = hint_pairs(inserted) if due else []
        else:
            created = {r[0] for r in rows}
            inserted = [execution_from_new(i) for i in items if i.execution_id in created]
            topics, hints = topics_for(e.status for e in inserted), hint_pairs(inserted)
        self._signals.signal(topics, hints)
        if len(inserted) == len(items):
            return [InsertOutcome(e, created=True) for e in inserted]
        missing = [i for i in items if i.execution_id not in created]
        return insert_outcomes(items, inserted, await self._holding_keys(missing))

    async def execution_insert_or_existing(
        self, items: Sequence[NewExecution]
    ) -> list[Execution | None]:
        if not items:
            return []
        count, rows, statuses, due = await self._insert(items)
        return await self._or_existing(items, count, rows, statuses, bool(due))

    async def execution_insert_or_existing_chunks(
        self, chunks: AsyncIterable[Sequence[NewExecution]]
    ) -> list[Execution | None]:
        done = await insert_chunks(self._pool, self._signals, chunks)
        if done.inserted == len(done.ids):  # every item inserted
            self._signals.signal(topics_for(done.statuses), hint_pairs(done.scheduled))
            return [None] * len(done.ids)
        created = {r[0] for r in done.rows}
        statuses, new = done.inserted_of(created)
        self._signals.signal(topics_for(statuses), hint_pairs(new))
        holders = await self._holding_pairs(done.missing(created))
        return done.answer(created, holders)

    async def _or_existing(
        self,
        items: Sequence[NewExecution],
        inserted: int,
        rows: list[Any],
        statuses: set[ExecutionStatus],
        due: bool,
    ) -> list[Execution | None]:
        """``execution_insert_or_existing``'s answer once its rows are committed (``inserted``
        of them; ``rows``: one per item inserted, its id first, needed only when that is not
        every item), the inserted ones signalled in this process."""
        if inserted == len(items):  # every item inserted, as in execution_insert_many
            self._signals.signal(topics_for(statuses), hint_pairs(items) if due else [])
            return [None] * len(items)
        created = {r[0] for r in rows}
        new = [i for i in items if i.execution_id in created]
        self._signals.signal(topics_for(i.status for i in new), hint_pairs(new))
        missing = [i for i in items if i.execution_id not in created]
        holders = {(e.tenant, e.idempotency_key): e for e in await self._holding_keys(missing)}
        return [
            None if i.execution_id in created else holders[(i.tenant, i.idempotency_key)]
            for i in items
        ]

    async def _insert(
        self, items: Sequence[NewExecution]
    ) -> tuple[int, list[Any], set[ExecutionStatus], list[Any]]:
        """The insert of both methods above: how many rows it inserted and, only when that is
        not every item, their ids (a row each, its id first: reading them made a tuple and a
        UUID per item, which nothing reads when every item was inserted); the items' statuses
        and their due hints (SCHEDULED ones: which shard is due when)."""
        # One statement, autocommit: the INSERT and its NOTIFYs (execution_insert). What is due
        # where rides on the DUE notification, for the shards' schedulers.
        statuses = {i.status for i in items}
        due = hint_pairs(items) if ExecutionStatus.SCHEDULED in statuses else []
        params: dict[str, Any] = {
            **insert_items(in_lock_order(items)),
            "notify": self._signals.insert_notifications(statuses, due),
        }
        rows: list[Any] | None = None
        statement = insert_statement(params)
        if statement is INSERT_ONE and self._lanes is not None:
            # One execution: on a lane's connection unless all are busy (submit_lanes.py).
            rows = await self._lanes.run(params)
        if rows is None:
            async with self._pool.connection() as conn:
                cursor = conn.cursor(row_factory=tuple_row)
                await cursor.execute(statement, params)
                if cursor.rowcount == len(items):
                    return len(items), [], statuses, due
                rows = await cursor.fetchall()
        return len(rows), rows, statuses, due

    async def _insert_pooled(self, statement: str, params: Mapping[str, Any]) -> int:
        """How many rows ``statement`` inserted, run on a connection of the pool."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(statement, params)
            return cursor.rowcount

    async def _holding_keys(self, missing: Sequence[NewExecution]) -> list[Execution]:
        """The executions holding the keys of the items not inserted. Only on a conflict: the
        read is a new statement, so under READ COMMITTED it sees the rows of competing
        submissions that made ours skip."""
        return await self._holding_pairs([(i.tenant, i.idempotency_key) for i in missing])

    async def _holding_pairs(self, pairs: Sequence[tuple[str, str | None]]) -> list[Execution]:
        """``_holding_keys`` of the (tenant, key) pairs of the items not inserted."""
        params = {"pairs": pairs_text(pairs)}
        return [execution_from_row(r) for r in await self._all("execution_get_by_key", params)]

    async def execution_get(self, tenant: str, execution_id: uuid.UUID) -> Execution | None:
        row = await self._one("execution_get", {"tenant": tenant, "execution_id": execution_id})
        return execution_from_row(row) if row else None

    async def execution_list(
        self, tenant: str, flt: ExecutionFilter, before: uuid.UUID | None, limit: int
    ) -> list[Execution]:
        params = {
            "tenant": tenant,
            "before": before,
            "statuses": [str(s) for s in flt.statuses] if flt.statuses else None,
            "definition_uri": flt.definition_uri,
            "idempotency_key": flt.idempotency_key,
            "key_like": like_prefix(flt.idempotency_key_prefix),
            "execute_from": opt_aware(flt.execute_from),
            "execute_to": opt_aware(flt.execute_to),
            "limit": limit,
        }
        if flt.definition_uri is not None:
            rows = await self._all("execution_list", params)
        else:
            # No (tenant, execution_id) index: one ordered page per status, merged
            # (execution_list_merged, migration 0021).
            merged = list_merged(frozenset(flt.statuses or ExecutionStatus))
            async with self._pool.connection() as conn:
                rows = await (await conn.execute(merged, params)).fetchall()
        return [execution_from_row(r) for r in rows]

    async def execution_cancel(
        self, tenant: str, execution_id: uuid.UUID, now: datetime
    ) -> Execution | None:
        params = {"tenant": tenant, "execution_id": execution_id, "now": require_aware(now)}
        return await self._guarded_update(
            "execution_cancel", params, ExecutionEventKind.CANCELLED, now
        )

    async def execution_cancel_unstarted(
        self, tenant: str, execution_id: uuid.UUID, now: datetime
    ) -> Execution | None:
        params = {"tenant": tenant, "execution_id": execution_id, "now": require_aware(now)}
        return await self._guarded_update(
            "execution_cancel_unstarted", params, ExecutionEventKind.CANCELLED, now
        )

    async def execution_replay(
        self, tenant: str, execution_id: uuid.UUID, max_attempts: int, now: datetime
    ) -> Execution | None:
        params = {
            "tenant": tenant,
            "execution_id": execution_id,
            "now": require_aware(now),
            "max_attempts": max_attempts,
        }
        return await self._guarded_update(
            "execution_replay", params, ExecutionEventKind.REPLAYED, now
        )

    async def _guarded_update(
        self, query: str, params: dict[str, Any], event: ExecutionEventKind, now: datetime
    ) -> Execution | None:
        """Runs a status-guarded UPDATE that also returns the ``prior_*`` values it overwrote
        (read under the row lock), and records them in a history event in the same
        transaction."""
        async with self._signalling_tx() as (conn, topics):
            cursor = await conn.execute(Q[query], params)
            row = await cursor.fetchone()
            if row is None:
                return None
            topics.update(topics_for([ExecutionStatus(row["status"])]))
            detail = {
                "fromStatus": row["prior_status"],
                "attemptCount": row["prior_attempt_count"],
                "error": row["prior_error"],
            }
            await conn.execute(
                Q["execution_event_insert"],
                {
                    "execution_id": row["execution_id"],
                    "kind": str(event),
                    "at": now,
                    "detail": Jsonb(detail),
                },
            )
            if event is ExecutionEventKind.CANCELLED and await workflow_event_record(
                conn, row["idempotency_key"], row["execution_id"], row["status"], now
            ):
                topics.add(Topic.WORKFLOW)
            return execution_from_row(row)

    # -- engine ---------------------------------------------------------------------------------

    async def execution_heartbeat(
        self,
        execution_id: uuid.UUID,
        fencing_token: int,
        lease: timedelta,
        now: datetime | None = None,
    ) -> bool:
        params = {
            "execution_id": execution_id,
            "fencing_token": fencing_token,
            "lease": lease,
            "now": opt_aware(now),
        }
        return await self._rowcount("execution_heartbeat", params) == 1

    async def execution_lease_expired(
        self, limit: int, now: datetime | None = None
    ) -> list[Execution]:
        rows = await self._all("execution_lease_expired", {"limit": limit, "now": opt_aware(now)})
        return [execution_from_row(r) for r in rows]

    async def execution_lease_next(self, now: datetime | None = None) -> timedelta | None:
        row = await self._one("execution_lease_next", {"now": opt_aware(now)})
        wait: timedelta | None = row["wait"] if row else None
        return wait

    async def execution_reap(
        self, results: Sequence[AttemptResult], now: datetime | None = None
    ) -> list[uuid.UUID]:
        if not results:
            return []
        # Sorted by id, so that two reapers with overlapping batches lock rows in one order.
        batch = sorted(results, key=lambda r: r.execution_id)
        params: dict[str, Any] = {
            "execution_ids": [r.execution_id for r in batch],
            "fencing_tokens": [r.fencing_token for r in batch],
            "statuses": [str(r.execution_status) for r in batch],
            "errors": [jsonb(r.error) for r in batch],
            "next_attempt_ats": [opt_aware(r.next_attempt_at) for r in batch],
            "now": opt_aware(now),
        }
        by_id = {r.execution_id: r for r in batch}
        async with self._signalling_tx() as (conn, topics):
            cursor = await conn.execute(Q["execution_reap_batch"], params)
            rows = await cursor.fetchall()
            if not rows:
                return []
            moved = [by_id[row["execution_id"]] for row in rows]
            await conn.execute(
                Q["attempt_reap_batch"],
                {
                    "execution_ids": [r.execution_id for r in moved],
                    "attempt_numbers": [row["attempt_count"] for row in rows],
                    "fencing_tokens": [r.fencing_token for r in moved],
                    "attempt_statuses": [str(r.attempt_status) for r in moved],
                    "errors": [jsonb(r.error) for r in moved],
                    "now": opt_aware(now),
                },
            )
            topics.update(topics_for([r.execution_status for r in moved]))
            if any(row["frees_slot"] for row in rows):
                topics.add(Topic.READY)  # work held back by its concurrency limit may start
            for row in rows:
                if await workflow_event_record(
                    conn, row["idempotency_key"], row["execution_id"], row["status"], opt_aware(now)
                ):
                    topics.add(Topic.WORKFLOW)
            failed = [row["execution_id"] for row in rows if row["status"] == "FAILED"]
            await webhook_outbox_execution_failed(conn, failed, opt_aware(now))
            return [r.execution_id for r in moved]

    async def execution_release(
        self,
        execution_id: uuid.UUID,
        fencing_token: int,
        now: datetime | None = None,
        why: str = RELEASED_AT_SHUTDOWN,
    ) -> bool:
        params: dict[str, Any] = {
            "execution_id": execution_id,
            "fencing_token": fencing_token,
            "now": opt_aware(now),
        }
        async with self._signalling_tx() as (conn, topics):
            cursor = await conn.execute(Q["execution_release"], params)
            row = await cursor.fetchone()
            if row is None:
                return False
            params["attempt_number"] = row["attempt_count"]
            params["attempt_status"] = str(AttemptStatus.ABANDONED)
            params["error"] = Jsonb({"kind": "released", "message": why})
            await conn.execute(Q["attempt_finish"], params)
            topics.add(Topic.READY)
        return True

    async def wait_for(self, topic: Topic, timeout: float) -> bool:
        return await self._signals.wait_for(topic, timeout)

    def hears_all(self) -> bool:
        return self._signals.hearing()

    async def listen(self, timeout: float = 10.0) -> bool:
        """Starts listening for other processes' signals now instead of at the first
        ``wait_for``; True once listening (no signal sent from then on is missed)."""
        return await self._signals.listen(timeout)
