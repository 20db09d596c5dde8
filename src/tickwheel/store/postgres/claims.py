"""The worker's hot path on PostgreSQL: mixed into ``PostgresStore`` (its pool and signals).

A claim is one statement (candidates, tokens, the RUNNING update and the attempt rows in
data-modifying CTEs), so one round trip and its own transaction. A batch of finished attempts
is one statement too, plus the rare extras in the same transaction: outputs kept by reference,
workflow outbox rows, and the NOTIFY that wakes schedulers for retries."""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow, TupleRow, tuple_row
from psycopg_pool import AsyncConnectionPool

from tickwheel.domain.models import Execution
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.domain.states import ExecutionStatus
from tickwheel.observability.tracing import now_ns, record_claims
from tickwheel.store.direct_order import DirectOrder
from tickwheel.store.engine_protocol import ClaimBatch
from tickwheel.store.postgres.claimed_rows import CLAIMED_COLUMNS, claimed_from_row
from tickwheel.store.postgres.notify import Signals, topics_for
from tickwheel.store.postgres.outbox import webhook_outbox_execution_failed, workflow_event_record
from tickwheel.store.postgres.rate_limits import PostgresRateLimits
from tickwheel.store.postgres.rows import jsonb, opt_aware, require_aware
from tickwheel.store.protocol import AttemptResult, Topic
from tickwheel.store.sqlfile import compact, load_queries
from tickwheel.store.workflow_keys import WORKFLOW_KEY_PREFIX

Q = load_queries("tickwheel.store.postgres.sql")
Conn = AsyncConnection[DictRow]


# The worker's statements are sent without their comment lines and indentation (compact).
# psycopg caches the conversion of a query's ``%(name)s`` placeholders only for queries of at
# most 4,096 bytes (``psycopg._queries.MAX_CACHED_STATEMENT_LENGTH``); a longer one is parsed
# again by a regular expression on every execution. The claims, with their comments, are 5 and
# 10 kB: ~120 µs of the worker's CPU per claim, some 8 µs an execution at 16 a claim. Without
# them the prepared claim and the finish are under the limit (the fair claim, 4.7 kB, is not:
# it runs only while several tenants have READY work, and is planned on every run anyway). The
# direct claim's indentation took it past the limit once its candidates read the READY tenant
# (migration 0023).
CLAIM = compact(Q["execution_claim_ready"])
CLAIM_UNLIMITED = compact(Q["execution_claim_ready_unlimited"])
CLAIM_DIRECT = compact(Q["execution_claim_ready_direct"])
CLAIM_ORDERED = compact(Q["execution_claim_ready_ordered"])
FINISH_MANY = compact(Q["execution_finish_many"])
HOT_STATEMENTS = (CLAIM, CLAIM_UNLIMITED, CLAIM_DIRECT, CLAIM_ORDERED, FINISH_MANY)
"""What the worker runs per batch, as sent (tests hold each under psycopg's cache limit)."""


_SHARD = CLAIMED_COLUMNS.index("shard_id")
"""Where a claimed row's shard is in the statements' rows."""

_TENANT = CLAIMED_COLUMNS.index("tenant")

_PLAIN, _ORDERED, _SHARDS = "plain", "ordered", "shards"
"""A claim's stages while shards are open: the plain statement, the ordered walk of a herd
(execution_claim_ready_ordered), the walk of the open shards (execution_claim_ready_direct)."""

_SEEN = len(CLAIMED_COLUMNS)
"""Where execution_claim_ready_unlimited's flags start in its rows: after the claimed columns."""


LIMITS_WINDOW = 5.0
"""Seconds a store claims through the statement that applies concurrency limits after it last
saw an execution under a limit among its candidates; then back to the unlimited statement."""


FAIR_WINDOW = 5.0
"""Seconds a store claims through the fair statement (execution_claim_ready) after it last saw
READY work of more than one tenant; then back to the unlimited statement, whose single-tenant
drain is one walk of executions_ready_tenant."""


def claim_params(
    worker_id: str,
    limit: int,
    lease: timedelta,
    now: datetime | None,
    definition_uris: Sequence[str] | None,
) -> dict[str, Any]:
    """The parameters of the claims, also those of ``warm_claims``: psycopg keys a prepared
    statement by its text and its parameters' types, so the claims prepared ahead are found
    again only if given the same names and types (a list of definitions or a fake clock's
    instant are other types: those are prepared at their first runs, as before)."""
    return {
        "worker_id": worker_id,
        "limit": limit,
        "lease": lease,
        "now": opt_aware(now),
        "definition_uris": list(definition_uris) if definition_uris is not None else None,
        "rate_ids": None,
        "walk": 0,  # the direct claim's first open shard (_walk_from)
        "tenant": None,  # the ordered direct claim's place in a herd (DirectOrder)
        "after": None,
    }


async def warm_claims(conn: Conn) -> None:
    """A hot connection's statements, prepared at its start (``Pool``'s ``warm``) by running
    each as a no-op: the claims with a limit of 0 and the finish with an empty batch touch no
    row. A herd's first claims on a new process then run a plan made before the instant on a
    session that has read the catalog of its tables already: the second hot connection, made
    at the herd's first finish, took 34 ms to lend and its first claim 75 ms where the warm one
    took 12 (docs/scaling.md, "The herd's prepared connections and its first claim alone"). With
    the system clock (``now`` None) and no list of definitions, the types of a worker's own
    claims.

    Not the direct claim: its generic plan would be made now, on whatever the table holds, and
    kept until the table is next analyzed. Made on an empty table analyzed empty (a new
    database), it scanned the whole due index for every open shard and filtered by shard: a
    herd stored after the worker started drained at a fifth of its rate (B3, docs/scaling.md
    "The direct claim's plan made at the herd"). Prepared at its fifth run, at a herd, its plan
    sees the herd's rows; it only serves herds of ``DIRECT_MIN`` or more, whose first claims
    are not the ones warming was for."""
    await conn.execute(Q["rate_limit_exists"], prepare=True)
    params = claim_params("", 0, timedelta(0), None, None)
    for claim in (CLAIM_UNLIMITED, CLAIM):
        await conn.execute(claim, params, prepare=True)
    finish = {"batch": "[]", "now": None, "skip_prefix": "", "ready_channel": "", "origin": ""}
    await conn.execute(FINISH_MANY, finish, prepare=True)


class PostgresClaims(PostgresRateLimits):
    _pool: AsyncConnectionPool[Conn]
    _hot: AsyncConnectionPool[Conn]
    """The pool of the claim and the one-statement finish (store.py, HOT_PLANNER)."""
    _signals: Signals
    _limits_until: float = 0.0
    """Until when (time.monotonic) claims apply concurrency limits: see LIMITS_WINDOW."""
    _fair_until: float = 0.0
    """Until when (time.monotonic) claims share the batch among tenants: see FAIR_WINDOW."""
    _direct: bool = False
    """Whether the last plain claim saw a shard open to the claims: the next one then also
    takes due SCHEDULED rows (execution_claim_ready_direct)."""
    _direct_from: int | None = None
    """The shard the next direct claim starts its walk of the open shards at: where this store's
    last one took its last row (see _walk_from)."""
    _order: DirectOrder = DirectOrder()
    """Where this store's next ordered direct claim walks the herd from (DirectOrder)."""
    _signalling_tx: Callable[[], AbstractAsyncContextManager[tuple[Conn, set[Topic]]]]

    async def execution_claim_ready(
        self,
        worker_id: str,
        limit: int,
        lease: timedelta,
        now: datetime | None = None,
        definition_uris: Sequence[str] | None = None,
    ) -> list[Execution]:
        params = claim_params(worker_id, limit, lease, now, definition_uris)
        # Autocommit: the statement is its own transaction. Its candidates stay locked until it
        # commits, so a cancel racing this claim either locked its row first (the row is skipped
        # here and the cancel wins) or waits for this commit and then finds the row RUNNING.
        started = now_ns()
        at = time.monotonic()
        limits = at < self._limits_until or at < self._fair_until
        # Tuple rows of CLAIMED_COLUMNS (claimed_rows.py says why not dicts of every column), in
        # binary: an instant is then 8 bytes each way instead of text that PostgreSQL formats
        # and psycopg parses (client and server CPU of claim and finish 0.92 each, medians of
        # 6 interleaved pairs, docs/scaling.md).
        rows: list[TupleRow] = []
        wait: float | None = None
        async with self._hot.connection() as conn:
            if await self.rates_present(conn):
                # Rate limits (docs/flow-control.md): the rows under a bucket start only here,
                # with tokens drawn under the buckets' locks; the statements below pass them over.
                # (Dict rows, which the rate step reads by name; their values are in column order.)
                rated, wait = await self.claim_rated(conn, params, CLAIM)
                rows += [tuple(r.values()) for r in rated]
                params["limit"] = limit - len(rows)
            # The stages of a claim while a shard is open to the claims (a herd's instant): the
            # plain statement (it says whether a shard is open), the ordered walk of the herd
            # from this store's place in it, then the walk of the open shards for what is left.
            stage = _ORDERED if self._direct else _PLAIN
            walked: list[tuple[str, uuid.UUID]] = []  # (tenant, id) of the direct rows taken
            fallback: list[tuple[str, uuid.UUID]] = []
            went_direct = False
            while not limits and params["limit"] > 0:
                # The statement of before limits, prepared; it claims none under a limit, and
                # says whether it saw one among its candidates. When more than one tenant has
                # READY work it claims nothing, and says so: the batch is then shared out by
                # the statement below. While a shard is open to the claims the same statement
                # with a second source, the due SCHEDULED rows of the open shards: statements
                # of their own, whose planning a drain does not pay. Prepared at their first
                # run (a herd's), not their fifth: ~2 ms of planning each of the first four.
                place = self._order.place() if stage == _ORDERED else None
                if stage == _ORDERED and place is None:
                    stage = _SHARDS
                walk = params["walk"] = self._walk_from() if stage == _SHARDS else 0
                if place is not None:
                    params["tenant"], params["after"] = place
                statement = {_PLAIN: CLAIM_UNLIMITED, _ORDERED: CLAIM_ORDERED}.get(
                    stage, CLAIM_DIRECT
                )
                went_direct |= stage != _PLAIN
                cursor = conn.cursor(row_factory=tuple_row, binary=True)
                await cursor.execute(statement, params, prepare=True if stage != _PLAIN else None)
                found = await cursor.fetchall()
                plain = [r for r in found if r[0] is not None]  # a row of NULLs: none claimed
                rows += plain
                if stage != _PLAIN and plain:
                    # In token order, the direct rows last (direct_n of them).
                    taken = plain[len(plain) - min(found[0][_SEEN + 3], len(plain)) :]
                    (walked if stage == _ORDERED else fallback).extend(
                        (r[_TENANT], r[0]) for r in taken
                    )
                    if stage == _SHARDS:
                        # The walk of the shards goes on from there.
                        self._direct_from = plain[-1][_SHARD]
                if found and found[0][_SEEN]:  # limited_seen
                    self._limits_until = time.monotonic() + LIMITS_WINDOW
                    limits = True
                if found and found[0][_SEEN + 1]:  # tenants_seen
                    self._fair_until = time.monotonic() + FAIR_WINDOW
                    limits = True
                params["limit"] -= len(plain)
                opened = bool(found and found[0][_SEEN + 2])  # open_seen
                self._direct = opened
                if stage == _PLAIN:
                    if not opened:
                        break
                    stage = _ORDERED  # a shard opened: the rest of the batch from it, at once
                    continue
                if not opened or params["limit"] <= 0:
                    break
                if stage == _ORDERED:
                    stage = _SHARDS  # what the bounded walk left: the walk of the shards
                    continue
                # Short: the walk found nothing more from shard ``walk`` up. Once round from
                # shard 0; when that walk was whole, the next starts anywhere.
                self._direct_from = 0 if walk else None
                if walk:
                    continue
                break
            if went_direct:
                self._order = self._order.took(walked, fallback)
            if not self._direct:
                self._order = DirectOrder()  # the herd is over: the next starts afresh
            if limits and params["limit"] > 0:
                # Fair across tenants, and applies limits. Prepared like the others now: its
                # generic plan, the only one the hot session makes (plan_cache_mode), is the
                # walk of each tenant's READY rows without a bitmap (test_plans_generic.py),
                # and it was planned anew at every claim (~1 ms). Before the hot session's
                # planner settings its generic plan read and sorted every READY row (a bitmap,
                # then a sort): 110 to 240 ms a claim with 17,000 READY (docs/scaling.md).
                cursor = conn.cursor(row_factory=tuple_row, binary=True)
                await cursor.execute(CLAIM, params)
                rows += await cursor.fetchall()
        claimed = [claimed_from_row(r, worker_id) for r in rows]
        record_claims(claimed, started)
        return claimed if wait is None else ClaimBatch(claimed, wait)

    def _walk_from(self) -> int:
        """The shard the next direct claim walks the open shards from (up; a claim left short
        is sent once more from shard 0): where this store's last direct claim took its last row,
        or at random, so that the stores of several processes start apart.

        A shard the claims emptied stays open until its scheduler closes it (at least a grace
        after the herd), and its due index keeps an entry per row taken until a scan marks it
        dead, which no scan can while any transaction on the server may still see the row. From
        shard 0, every claim passed every emptied shard: with a herd of 100,000 nine tenths
        taken, 88,000 buffer hits and 0.4-0.6 s a claim (docs/scaling.md, "The direct claim's
        walk"). From where its last one stopped, a store passes each about once per herd."""
        if self._direct_from is None:
            self._direct_from = random.randrange(SHARD_COUNT)
        return self._direct_from

    async def attempt_count_lost(self, execution_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, int]:
        if not execution_ids:
            return {}
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                Q["attempt_count_lost"], {"execution_ids": list(execution_ids)}
            )
            rows = await cursor.fetchall()
        return {r["execution_id"]: int(r["n"]) for r in rows}

    async def attempt_finish(self, result: AttemptResult, now: datetime | None = None) -> bool:
        [accepted] = await self.attempt_finish_many([result], now)
        return accepted

    async def attempt_finish_many(
        self, results: Sequence[AttemptResult], now: datetime | None = None
    ) -> list[bool]:
        if not results:
            return []
        at = opt_aware(now)
        # Sorted by id, so that two batches (or a batch and the reaper's) that share rows lock
        # them in one order and cannot deadlock.
        # (By the id's integer: the order of uuids in PostgreSQL, compared in C, not by
        # UUID.__lt__ in Python.)
        batch = sorted(results, key=_id_int)
        done: dict[tuple[uuid.UUID, int], TupleRow] = {}
        # The common result (a final status that wakes nobody, its output inline) needs nothing
        # but the statement: one autocommit round trip instead of BEGIN, statement, COMMIT.
        # A dead letter (FAILED) is not plain: its webhook outbox row commits with it.
        plain = [
            r
            for r in batch
            if r.output_reference is None
            and not _wakes(r)
            and r.execution_status is not ExecutionStatus.FAILED
        ]
        if plain:
            params = {
                "batch": _batch_json(plain),
                "now": at,
                "skip_prefix": WORKFLOW_KEY_PREFIX,
                **self._signals.ready_wakeup(),
            }
            async with self._hot.connection() as conn:
                cursor = conn.cursor(row_factory=tuple_row)
                await cursor.execute(FINISH_MANY, params)
                done.update(_by_key(await cursor.fetchall()))
        # The rest, and whatever the statement left (workflow task runs, whose outbox row
        # commits with the finish; stale tokens, refused again), in one transaction.
        rest = [r for r in batch if (r.execution_id, r.fencing_token) not in done]
        if rest:
            done.update(await self._finish_in_tx(rest, at))
        if any(row[_FREES_SLOT] for row in done.values()):
            # A concurrency slot came free: the statement NOTIFYed the other processes' workers;
            # this process's own wake up here, without a round trip.
            self._signals.signal([Topic.READY])
        return _accepted(results, done)

    async def _finish_in_tx(
        self, batch: Sequence[AttemptResult], at: datetime | None
    ) -> dict[tuple[uuid.UUID, int], TupleRow]:
        """Finishes ``batch`` (sorted by id) with its extras: outputs kept by reference, the
        workflow outbox rows and the NOTIFYs, all committed together."""
        params = {
            "batch": _batch_json(batch),
            "now": at,
            "skip_prefix": None,
            **self._signals.ready_wakeup(),
        }
        async with self._signalling_tx() as (conn, topics):
            cursor = conn.cursor(row_factory=tuple_row)
            await cursor.execute(FINISH_MANY, params)
            done = _by_key(await cursor.fetchall())
            by_key = {(r.execution_id, r.fencing_token): r for r in batch}
            for key, row in done.items():
                result = by_key[key]
                if result.output_reference is not None:
                    await conn.execute(
                        Q["execution_output_put"],
                        {
                            "execution_id": result.execution_id,
                            "output": jsonb(result.output),
                            "size_bytes": result.output_size,
                            "now": at,
                        },
                    )
                # The outbox row in the finishing transaction: an orchestrator learns of every
                # finished task run, and of none that rolled back.
                if await workflow_event_record(
                    conn, row[_KEY], result.execution_id, row[_STATUS], at
                ):
                    topics.add(Topic.WORKFLOW)
            topics.update(topics_for(by_key[key].execution_status for key in done))
            # Dead letters only: their webhook outbox rows, in this transaction.
            failed = [key[0] for key, row in done.items() if row[_STATUS] == "FAILED"]
            await webhook_outbox_execution_failed(conn, failed, at)
        return done


def _id_int(result: AttemptResult) -> int:
    return result.execution_id.int


def _wakes(result: AttemptResult) -> bool:
    """Whether the status the result moves to must NOTIFY someone (a retry wakes schedulers)."""
    return bool(topics_for([result.execution_status]))


# The columns of execution_finish_many's tuple rows: execution_id, fencing_token, attempt_count,
# idempotency_key, status, frees_slot, woken.
_KEY, _STATUS, _FREES_SLOT = 3, 4, 5


def _by_key(rows: Sequence[TupleRow]) -> dict[tuple[uuid.UUID, int], TupleRow]:
    return {(row[0], int(row[1])): row for row in rows}


_COMPACT = json.JSONEncoder(separators=(",", ":"))
"""One encoder for every batch (``json.dumps`` with an argument builds one per call)."""


def _batch_json(batch: Sequence[AttemptResult]) -> str:
    """The results as the JSON array ``execution_finish_many`` reads with jsonb_to_recordset.

    Per result, as cheaply as Python allows, since every execution passes here: the id as its
    32 hex digits (``uuid`` reads them without hyphens; ``str`` of a UUID formats the hyphens in
    Python, ~1.5 µs more), the statuses as they are (a ``StrEnum`` is encoded as its value)."""
    return _COMPACT.encode(
        [
            {
                "execution_id": r.execution_id.hex,
                "fencing_token": r.fencing_token,
                "status": r.execution_status,
                "attempt_status": r.attempt_status,
                # An output kept by reference stays out of the hot row (written separately).
                "output": None if r.output_reference else r.output,
                "output_reference": r.output_reference,
                "error": r.error,
                "next_attempt_at": (
                    None
                    if r.next_attempt_at is None
                    else require_aware(r.next_attempt_at).isoformat()
                ),
                "lease_expired_only": r.lease_expired_only,
            }
            for r in batch
        ]
    )


def _accepted(
    results: Sequence[AttemptResult], done: Mapping[tuple[uuid.UUID, int], TupleRow]
) -> list[bool]:
    """Per result, in the caller's order: True when it committed. A result repeated in the
    batch is accepted once (the first), as the row could only be finished once."""
    seen: set[tuple[uuid.UUID, int]] = set()
    answer: list[bool] = []
    for r in results:
        key = (r.execution_id, r.fencing_token)
        answer.append(key in done and key not in seen)
        seen.add(key)
    return answer
