"""The embedded SQLite store: one file, zero setup, the default for one machine.

One connection per store, used by one transaction at a time (an ``asyncio.Lock``); write
transactions are ``BEGIN IMMEDIATE`` so that two processes sharing the file queue on the write
lock instead of failing halfway through."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import AsyncIterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiosqlite

from tickwheel.domain.models import (
    Execution,
    ExecutionEventKind,
    ExecutionFilter,
)
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import NewExecution
from tickwheel.store.due import DueFanout
from tickwheel.store.engine_protocol import RELEASED_AT_SHUTDOWN
from tickwheel.store.protocol import AttemptResult, InsertOutcome, Topic
from tickwheel.store.sqlfile import load_queries
from tickwheel.store.sqlite.api_keys import SqliteApiKeys
from tickwheel.store.sqlite.caller_tx import SqliteCallerTx
from tickwheel.store.sqlite.claims import SqliteClaims
from tickwheel.store.sqlite.codec import from_us, jload, opt_us, to_us
from tickwheel.store.sqlite.cron import SqliteCronStore
from tickwheel.store.sqlite.definitions import SqliteDefinitions
from tickwheel.store.sqlite.files import create_private
from tickwheel.store.sqlite.flow import SqliteFlow
from tickwheel.store.sqlite.history import SqliteHistory
from tickwheel.store.sqlite.migrating import SqliteMigrations
from tickwheel.store.sqlite.promotion import SqlitePromotion
from tickwheel.store.sqlite.rows import (
    execution_row,
    insert_params,
)
from tickwheel.store.sqlite.running import SqliteRunning
from tickwheel.store.sqlite.sessions import SqliteSessionStore
from tickwheel.store.sqlite.shard_leases import SqliteShardLeases
from tickwheel.store.sqlite.stats import SqliteStatsStore
from tickwheel.store.sqlite.webhooks import SqliteWebhookStore, webhook_outbox_execution_failed
from tickwheel.store.sqlite.workers import SqliteWorkerRegistry
from tickwheel.store.sqlite.workflow_views import SqliteWorkflowViewStore
from tickwheel.store.sqlite.workflows import SqliteWorkflowStore, workflow_event_record

Q = load_queries("tickwheel.store.sqlite.sql")


class SqliteStore(
    SqliteMigrations,
    SqliteClaims,
    SqlitePromotion,
    SqliteWorkerRegistry,
    SqliteShardLeases,
    SqliteDefinitions,
    SqliteHistory,
    SqliteApiKeys,
    SqliteCallerTx,
    SqliteRunning,
    SqliteFlow,
):
    dialect = "sqlite"

    def __init__(self, conn: aiosqlite.Connection, path: str) -> None:
        super().__init__(conn, asyncio.Lock())
        self._events = {topic: asyncio.Event() for topic in Topic}
        self._due = DueFanout()
        self.path = path

    @property
    def cron(self) -> SqliteCronStore:
        """The Cron Service's tables on this same connection (and its lock)."""
        return SqliteCronStore(self._conn, self._lock, self._events[Topic.CRON])

    @property
    def workflows(self) -> SqliteWorkflowStore:
        """The DAG orchestrator's tables on this same connection (and its lock)."""
        return SqliteWorkflowStore(self._conn, self._lock)

    @property
    def stats(self) -> SqliteStatsStore:
        """The dashboard's read-only aggregates on this same connection (and its lock)."""
        return SqliteStatsStore(self._conn, self._lock)

    @property
    def webhooks(self) -> SqliteWebhookStore:
        """Webhook subscriptions and deliveries on this same connection (and its lock)."""
        return SqliteWebhookStore(self._conn, self._lock)

    @property
    def sessions(self) -> SqliteSessionStore:
        """The dashboard's sessions on this same connection (and its lock)."""
        return SqliteSessionStore(self._conn, self._lock)

    @property
    def workflow_views(self) -> SqliteWorkflowViewStore:
        """The dashboard's read-only workflow views on this same connection (and its lock)."""
        return SqliteWorkflowViewStore(self._conn, self._lock)

    @classmethod
    async def open(cls, path: str) -> SqliteStore:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            create_private(Path(path))
        conn = await aiosqlite.connect(path, isolation_level=None)
        conn.row_factory = sqlite3.Row
        for pragma in (
            "PRAGMA journal_mode = WAL",
            # FULL: an acknowledged execution survives a power cut, not only a process crash.
            "PRAGMA synchronous = FULL",
            "PRAGMA foreign_keys = ON",
            "PRAGMA busy_timeout = 10000",
        ):
            await conn.execute(pragma)
        return cls(conn, path)

    async def close(self) -> None:
        await self._conn.close()

    async def ping(self) -> None:
        await self._conn.execute("SELECT 1")

    # -- executions -----------------------------------------------------------------------------

    async def execution_insert_many(self, items: Sequence[NewExecution]) -> list[InsertOutcome]:
        outcomes: list[InsertOutcome] = []
        async with self._tx() as conn:
            for item in items:
                cursor = await conn.execute(Q["execution_insert"], insert_params(item))
                row = await cursor.fetchone()
                if row is not None:
                    outcomes.append(InsertOutcome(execution_row(row), created=True))
                    continue
                cursor = await conn.execute(
                    Q["execution_get_by_key"],
                    {"tenant": item.tenant, "idempotency_key": item.idempotency_key},
                )
                existing = await cursor.fetchone()
                if existing is None:  # pragma: no cover - the constraint guarantees a row
                    raise RuntimeError("insert conflicted but no execution holds the key")
                outcomes.append(InsertOutcome(execution_row(existing), created=False))
        created = {o.execution.status for o in outcomes if o.created}
        if ExecutionStatus.READY in created:
            self._signal(Topic.READY)
        if ExecutionStatus.SCHEDULED in created:
            self._signal_due([o.execution for o in outcomes if o.created])
        return outcomes

    async def execution_insert_one(self, item: NewExecution) -> InsertOutcome:
        # One writer, in process: a batch of one is already an insert and at most a lookup.
        [outcome] = await self.execution_insert_many((item,))
        return outcome

    async def execution_insert_or_existing(
        self, items: Sequence[NewExecution]
    ) -> list[Execution | None]:
        return [None if o.created else o.execution for o in await self.execution_insert_many(items)]

    async def execution_insert_or_existing_chunks(
        self, chunks: AsyncIterable[Sequence[NewExecution]]
    ) -> list[Execution | None]:
        # One writer, in process: nothing to overlap with, so the chunks are taken first.
        return await self.execution_insert_or_existing([i async for chunk in chunks for i in chunk])

    async def execution_get(self, tenant: str, execution_id: uuid.UUID) -> Execution | None:
        row = await self._one(
            "execution_get", {"tenant": tenant, "execution_id": str(execution_id)}
        )
        return execution_row(row) if row else None

    async def execution_list(
        self, tenant: str, flt: ExecutionFilter, before: uuid.UUID | None, limit: int
    ) -> list[Execution]:
        params = {
            "tenant": tenant,
            "before": str(before) if before else None,
            "statuses": json.dumps([str(s) for s in flt.statuses]) if flt.statuses else None,
            "definition_uri": flt.definition_uri,
            "idempotency_key": flt.idempotency_key,
            "key_prefix": flt.idempotency_key_prefix,
            "execute_from": opt_us(flt.execute_from),
            "execute_to": opt_us(flt.execute_to),
            "limit": limit,
        }
        return [execution_row(r) for r in await self._all("execution_list", params)]

    async def execution_cancel(
        self, tenant: str, execution_id: uuid.UUID, now: datetime
    ) -> Execution | None:
        return await self._guarded_update(
            "execution_cancel",
            {"tenant": tenant, "execution_id": str(execution_id), "now": to_us(now)},
            ExecutionEventKind.CANCELLED,
            now,
        )

    async def execution_cancel_unstarted(
        self, tenant: str, execution_id: uuid.UUID, now: datetime
    ) -> Execution | None:
        return await self._guarded_update(
            "execution_cancel_unstarted",
            {"tenant": tenant, "execution_id": str(execution_id), "now": to_us(now)},
            ExecutionEventKind.CANCELLED,
            now,
        )

    async def execution_replay(
        self, tenant: str, execution_id: uuid.UUID, max_attempts: int, now: datetime
    ) -> Execution | None:
        params = {
            "tenant": tenant,
            "execution_id": str(execution_id),
            "now": to_us(now),
            "max_attempts": max_attempts,
        }
        replayed = await self._guarded_update(
            "execution_replay", params, ExecutionEventKind.REPLAYED, now
        )
        if replayed is not None:
            self._signal(Topic.READY)
        return replayed

    async def _guarded_update(
        self, query: str, params: dict[str, Any], event: ExecutionEventKind, now: datetime
    ) -> Execution | None:
        """Runs a status-guarded UPDATE and records, in the same transaction, a history event
        that keeps what the update overwrites (status, attempts used, last error)."""
        async with self._tx() as conn:
            cursor = await conn.execute(Q["execution_get"], params)
            prior = await cursor.fetchone()
            cursor = await conn.execute(Q[query], params)
            row = await cursor.fetchone()
            if row is None or prior is None:
                return None
            detail = {
                "fromStatus": prior["status"],
                "attemptCount": prior["attempt_count"],
                "error": jload(prior["error"]),
            }
            await conn.execute(
                Q["execution_event_insert"],
                {
                    "execution_id": params["execution_id"],
                    "kind": str(event),
                    "at": to_us(now),
                    "detail": json.dumps(detail),
                },
            )
            if event is ExecutionEventKind.CANCELLED and await workflow_event_record(
                conn, row["idempotency_key"], params["execution_id"], row["status"], to_us(now)
            ):
                self._signal(Topic.WORKFLOW)
            return execution_row(row)

    # -- engine ---------------------------------------------------------------------------------

    async def execution_heartbeat(
        self,
        execution_id: uuid.UUID,
        fencing_token: int,
        lease: timedelta,
        now: datetime | None = None,
    ) -> bool:
        at = now or datetime.now(UTC)
        params = {
            "execution_id": str(execution_id),
            "fencing_token": fencing_token,
            "lease_expires_at": to_us(at + lease),
            "now": to_us(at),
        }
        async with self._tx() as conn:
            cursor = await conn.execute(Q["execution_heartbeat"], params)
            return cursor.rowcount == 1

    async def execution_lease_expired(
        self, limit: int, now: datetime | None = None
    ) -> list[Execution]:
        rows = await self._all("execution_lease_expired", {"limit": limit, "now": _now_us(now)})
        return [execution_row(r) for r in rows]

    async def execution_lease_next(self, now: datetime | None = None) -> timedelta | None:
        # SQLite has no server clock: the processes sharing the file share this machine's.
        row = await self._one("execution_lease_next", {})
        if row is None or row["due"] is None:
            return None
        return from_us(int(row["due"])) - (now or datetime.now(UTC))

    async def execution_reap(
        self, results: Sequence[AttemptResult], now: datetime | None = None
    ) -> list[uuid.UUID]:
        now_us = _now_us(now)
        reaped: list[uuid.UUID] = []
        retrying = False
        async with self._tx() as conn:  # one write transaction for the whole batch
            for result in results:
                error = json.dumps(result.error) if result.error is not None else None
                params = {
                    "execution_id": str(result.execution_id),
                    "fencing_token": result.fencing_token,
                    "status": str(result.execution_status),
                    "error": error,
                    "next_attempt_at": opt_us(result.next_attempt_at),
                    "now": now_us,
                }
                cursor = await conn.execute(Q["execution_reap_batch"], params)
                row = await cursor.fetchone()
                if row is None:
                    continue
                await conn.execute(
                    Q["attempt_reap_batch"],
                    {
                        **params,
                        "attempt_number": row["attempt_count"],
                        "attempt_status": str(result.attempt_status),
                    },
                )
                if await workflow_event_record(
                    conn, row["idempotency_key"], result.execution_id, row["status"], now_us
                ):
                    self._signal(Topic.WORKFLOW)
                retrying |= result.execution_status is ExecutionStatus.RETRY_WAIT
                reaped.append(result.execution_id)
                if result.execution_status is ExecutionStatus.FAILED:
                    await webhook_outbox_execution_failed(conn, [result.execution_id], now_us)
        if retrying:
            self._signal(Topic.DUE)
        if reaped:
            self._signal(Topic.READY)  # a concurrency slot it held is free: waiting work may start
        return reaped

    async def execution_release(
        self,
        execution_id: uuid.UUID,
        fencing_token: int,
        now: datetime | None = None,
        why: str = RELEASED_AT_SHUTDOWN,
    ) -> bool:
        params = {
            "execution_id": str(execution_id),
            "fencing_token": fencing_token,
            "now": _now_us(now),
        }
        async with self._tx() as conn:
            cursor = await conn.execute(Q["execution_release"], params)
            row = await cursor.fetchone()
            if row is None:
                return False
            await conn.execute(
                Q["attempt_finish"],
                {
                    **params,
                    "attempt_number": row["attempt_count"],
                    "attempt_status": "ABANDONED",
                    "error": json.dumps({"kind": "released", "message": why}),
                },
            )
        self._signal(Topic.READY)
        return True

    async def wait_for(self, topic: Topic, timeout: float) -> bool:
        """In-process only: a worker in another process on the same SQLite file learns of new
        work by polling, which is what the embedded store is for."""
        event = self._events[topic]
        if event.is_set():  # asyncio.wait_for(..., 0) gives up without looking
            event.clear()
            return True
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            return False
        event.clear()
        return True

    def hears_all(self) -> bool:
        return False  # another process's writes to the file signal nothing here

    def _signal(self, topic: Topic) -> None:
        if topic is Topic.DUE:
            self._due.poke()
        self._events[topic].set()


def _now_us(now: datetime | None) -> int:
    return to_us(now or datetime.now(UTC))
