"""The worker's hot path on SQLite: mixed into ``SqliteStore`` (its connection, lock and events).

A claim and a batch of finished attempts each take one write transaction (``BEGIN IMMEDIATE``),
so one commit, one fsync, however many executions they carry: with ``synchronous = FULL`` the
commit is what a write costs here. The write lock serialises claimers, so the fencing tokens of
a claim are the counter's next values, drawn in the same transaction."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import aiosqlite

from tickwheel.domain.models import Execution
from tickwheel.domain.states import ExecutionStatus
from tickwheel.observability.tracing import now_ns, record_claims
from tickwheel.store.direct_order import DirectOrder
from tickwheel.store.engine_protocol import ClaimBatch
from tickwheel.store.protocol import AttemptResult, Topic
from tickwheel.store.sqlfile import load_queries
from tickwheel.store.sqlite.codec import opt_us, to_us
from tickwheel.store.sqlite.rate_limits import SqliteRateLimits
from tickwheel.store.sqlite.rows import execution_row
from tickwheel.store.sqlite.webhooks import webhook_outbox_execution_failed
from tickwheel.store.sqlite.workflows import workflow_event_record

Q = load_queries("tickwheel.store.sqlite.sql")


class SqliteClaims(SqliteRateLimits):
    _signal: Callable[[Topic], None]
    _order: DirectOrder = DirectOrder()
    """Where this store's next direct claim walks a herd in id order from (DirectOrder)."""

    async def execution_claim_ready(
        self,
        worker_id: str,
        limit: int,
        lease: timedelta,
        now: datetime | None = None,
        definition_uris: Sequence[str] | None = None,
    ) -> list[Execution]:
        at = now or datetime.now(UTC)
        params: dict[str, Any] = {
            "worker_id": worker_id,
            "limit": limit,
            "lease_expires_at": to_us(at + lease),
            "now": to_us(at),
            "definition_uris": json.dumps(list(definition_uris))
            if definition_uris is not None
            else None,
            "rate_ids": None,
        }
        started = now_ns()
        wait: float | None = None
        async with self._tx() as conn:
            # Rate limits (docs/flow-control.md): the rows under a bucket start only through the
            # rate step, which draws their tokens in this write transaction; the statements
            # below pass them over.
            rows, wait = await self.claim_rated(conn, params, _claim)
            params["limit"] = limit - len(rows)
            if params["limit"] > 0:
                # Fair across tenants only while more than one has READY work: the fair
                # statement costs a single tenant's drain ~45% more per claim
                # (docs/flow-control.md).
                cursor = await conn.execute(Q["execution_claim_tenants_spread"])
                spread = await cursor.fetchone()
                fair = spread is not None and bool(spread[0])
                name = "execution_claim_ready_fair" if fair else "execution_claim_ready"
                rows += await _claim(conn, Q[name], params)
                params["limit"] = limit - len(rows)
                if not fair and params["limit"] > 0:
                    # The due SCHEDULED rows of open shards, as they are (docs/scaling.md,
                    # "Claiming a herd without promoting it"): only in the plain claim, as on
                    # PostgreSQL; the scheduler promotes what they leave a little later. First
                    # the herd in id order from this store's place in it, then the walk of the
                    # open shards for what that bounded walk left ("The direct claim in id
                    # order").
                    rows += await self._claim_direct(conn, params)
        # RETURNING comes in no particular order: tokens follow the claim order.
        claimed = sorted((execution_row(r) for r in rows), key=_token)
        record_claims(claimed, started)
        return claimed if wait is None else ClaimBatch(claimed, wait)

    async def _claim_direct(
        self, conn: aiosqlite.Connection, params: dict[str, Any]
    ) -> list[sqlite3.Row]:
        place = self._order.place()
        walked: list[sqlite3.Row] = []
        if place is not None:
            tenant, after = place
            ordered = {**params, "tenant": tenant, "after": str(after)}
            walked = await _claim(conn, Q["execution_claim_ordered"], ordered)
        fallback: list[sqlite3.Row] = []
        if params["limit"] - len(walked) > 0:
            rest = {**params, "limit": params["limit"] - len(walked)}
            fallback = await _claim(conn, Q["execution_claim_direct"], rest)
        self._order = self._order.took(_places(walked), _places(fallback))
        return walked + fallback

    async def attempt_count_lost(self, execution_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, int]:
        if not execution_ids:
            return {}
        ids = json.dumps([str(execution_id) for execution_id in execution_ids])
        rows = await self._all("attempt_count_lost", {"execution_ids": ids})
        return {uuid.UUID(r["execution_id"]): int(r["n"]) for r in rows}

    async def attempt_finish(self, result: AttemptResult, now: datetime | None = None) -> bool:
        [accepted] = await self.attempt_finish_many([result], now)
        return accepted

    async def attempt_finish_many(
        self, results: Sequence[AttemptResult], now: datetime | None = None
    ) -> list[bool]:
        if not results:
            return []
        now_us = to_us(now or datetime.now(UTC))
        accepted: list[bool] = []
        outbox = freed = False
        async with self._tx() as conn:
            for result in results:
                ok, recorded, frees_slot = await _finish_one(conn, result, now_us)
                accepted.append(ok)
                outbox |= recorded
                freed |= frees_slot
            # Dead letters only: their webhook outbox rows, in this transaction.
            failed = [
                r.execution_id
                for r, ok in zip(results, accepted, strict=True)
                if ok and r.execution_status is ExecutionStatus.FAILED
            ]
            await webhook_outbox_execution_failed(conn, failed, now_us)
        if outbox:
            self._signal(Topic.WORKFLOW)
        statuses = {r.execution_status for r, ok in zip(results, accepted, strict=True) if ok}
        if ExecutionStatus.READY in statuses or freed:  # freed: a concurrency slot came free
            self._signal(Topic.READY)
        if ExecutionStatus.RETRY_WAIT in statuses:
            self._signal(Topic.DUE)  # the scheduler may be asleep past the retry's time
        return accepted


async def _claim(conn: aiosqlite.Connection, sql: str, params: dict[str, Any]) -> list[sqlite3.Row]:
    """One claim statement with what goes with it in the transaction: the fencing tokens it drew,
    the concurrency slots it took and the attempt rows."""
    cursor = await conn.execute(sql, params)
    rows = list(await cursor.fetchall())
    if not rows:
        return []
    await conn.execute(Q["fencing_token_next"], {"n": len(rows)})
    # The slots the executions with a limit now hold: the trigger of migration 0018 frees each
    # when its execution leaves RUNNING, whichever way it does.
    for r in rows:
        if r["concurrency_limit"] is not None:
            await conn.execute(
                Q["concurrency_hold_insert"],
                {
                    "tenant": r["tenant"],
                    "definition_uri": r["definition_uri"],
                    "concurrency_key": r["concurrency_key"],
                    "execution_id": r["execution_id"],
                },
            )
    ids = [r["execution_id"] for r in rows]
    await conn.execute(Q["attempt_insert"], {"execution_ids": json.dumps(ids), **params})
    return rows


async def _finish_one(
    conn: aiosqlite.Connection,
    result: AttemptResult,
    now_us: int,
) -> tuple[bool, bool, bool]:
    """One result of the batch, inside its transaction: whether it was accepted (False, and
    nothing written, when the token is stale), whether it wrote a workflow outbox row, and
    whether it freed a concurrency slot."""
    error = json.dumps(result.error) if result.error is not None else None
    inline = result.output is not None and result.output_reference is None
    cursor = await conn.execute(
        Q["execution_finish_many"],
        {
            "execution_id": str(result.execution_id),
            "fencing_token": result.fencing_token,
            "status": str(result.execution_status),
            "output": json.dumps(result.output) if inline else None,
            "output_reference": result.output_reference,
            "error": error,
            "next_attempt_at": opt_us(result.next_attempt_at),
            "lease_expired_only": int(result.lease_expired_only),
            "now": now_us,
        },
    )
    row = await cursor.fetchone()
    if row is None:
        return False, False, False
    if result.output_reference is not None:
        await conn.execute(
            Q["execution_output_put"],
            {
                "execution_id": str(result.execution_id),
                "output": json.dumps(result.output),
                "size_bytes": result.output_size,
                "now": now_us,
            },
        )
    await conn.execute(
        Q["attempt_finish"],
        {
            "execution_id": str(result.execution_id),
            "attempt_number": row["attempt_count"],
            "fencing_token": result.fencing_token,
            "attempt_status": str(result.attempt_status),
            "error": error,
            "now": now_us,
        },
    )
    # The outbox row in the finishing transaction: an orchestrator learns of every finished
    # task run, and of none that rolled back.
    recorded = await workflow_event_record(
        conn, row["idempotency_key"], result.execution_id, str(result.execution_status), now_us
    )
    return True, recorded, bool(row["frees_slot"])


def _places(rows: Sequence[sqlite3.Row]) -> list[tuple[str, uuid.UUID]]:
    return [(r["tenant"], uuid.UUID(r["execution_id"])) for r in rows]


def _token(execution: Execution) -> int:
    assert execution.fencing_token is not None
    return execution.fencing_token
