"""The DAG orchestrator's tables on PostgreSQL.

Built on the main store's pool (``PostgresWorkflowStore(store.pool)``), autocommit like it: a
one-statement method is its own transaction, the others open one. Any number of orchestrators
share the tables; ``workflow_event_claim`` hands each a disjoint batch of outbox rows with
``FOR UPDATE SKIP LOCKED`` and a lease."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from tickwheel.domain.workflow_runs import RunStatus, TaskRunStatus
from tickwheel.store.postgres.webhooks import webhook_outbox_workflow_run_failed
from tickwheel.store.sqlfile import load_queries
from tickwheel.store.workflow_protocol import (
    StoredWorkflow,
    TaskRunRecord,
    WorkflowEvent,
    WorkflowRunRecord,
)

Q = load_queries("tickwheel.store.postgres.sql")

Conn = AsyncConnection[DictRow]


class PostgresWorkflowStore:
    def __init__(self, pool: AsyncConnectionPool[Conn]) -> None:
        self._pool = pool

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[Conn]:
        async with self._pool.connection() as conn, conn.transaction():
            yield conn

    async def _all(self, query: str, params: dict[str, Any]) -> list[DictRow]:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q[query], params)
            return await cursor.fetchall()

    async def _rowcount(self, query: str, params: dict[str, Any]) -> int:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q[query], params)
            return cursor.rowcount

    async def workflow_definition_insert(self, stored: StoredWorkflow) -> bool:
        params = {
            "owner": stored.owner,
            "name": stored.name,
            "version": stored.version,
            "document": Jsonb(stored.document),
            "content_hash": stored.content_hash,
            "created_at": stored.created_at,
        }
        return await self._rowcount("workflow_definition_insert", params) == 1

    async def workflow_definition_get(
        self, tenant: str, name: str, version: int | None = None
    ) -> StoredWorkflow | None:
        params = {"tenant": tenant, "name": name, "version": version}
        rows = await self._all("workflow_definition_get", params)
        return StoredWorkflow(**rows[0]) if rows else None

    async def workflow_definition_list(self, tenant: str) -> list[StoredWorkflow]:
        rows = await self._all("workflow_definition_list", {"tenant": tenant})
        return [StoredWorkflow(**r) for r in rows]

    async def workflow_run_insert(
        self,
        run: WorkflowRunRecord,
        task_names: Sequence[str],
        depends_on: Mapping[str, Sequence[str]] | None = None,
    ) -> bool:
        upstream = depends_on or {}
        params = {
            **{k: getattr(run, k) for k in run.__dataclass_fields__},
            "inputs": Jsonb(run.inputs),
            "status": str(run.status),
        }
        async with self._tx() as conn:
            cursor = await conn.execute(Q["workflow_run_insert"], params)
            if cursor.rowcount != 1:
                return False
            # executemany pipelines the inserts: a fan-out of hundreds is not hundreds of trips.
            rows = [
                {
                    "workflow_run_id": run.workflow_run_id,
                    "task_name": name,
                    "now": run.created_at,
                    "position": position,
                    "depends_on": Jsonb(list(upstream.get(name, ()))),
                }
                for position, name in enumerate(task_names)
            ]
            async with conn.cursor() as cursor_many:
                await cursor_many.executemany(Q["workflow_task_run_insert"], rows)
            return True

    async def workflow_run_list_stalled(
        self,
        grace: timedelta,
        limit: int,
        after: uuid.UUID | None = None,
        now: datetime | None = None,
    ) -> list[uuid.UUID]:
        params = {"grace": grace, "limit": limit, "after": after, "now": now}
        return [r["workflow_run_id"] for r in await self._all("workflow_run_list_stalled", params)]

    async def workflow_run_get(
        self, tenant: str | None, workflow_run_id: uuid.UUID
    ) -> WorkflowRunRecord | None:
        params = {"tenant": tenant, "workflow_run_id": workflow_run_id}
        rows = await self._all("workflow_run_get", params)
        return _run(rows[0]) if rows else None

    async def workflow_run_get_by_key(
        self, tenant: str, idempotency_key: str
    ) -> WorkflowRunRecord | None:
        params = {"tenant": tenant, "idempotency_key": idempotency_key}
        rows = await self._all("workflow_run_get_by_key", params)
        return _run(rows[0]) if rows else None

    async def workflow_run_finish(
        self, workflow_run_id: uuid.UUID, status: RunStatus, now: datetime, *, retry_count: int
    ) -> bool:
        params = {
            "workflow_run_id": workflow_run_id,
            "status": str(status),
            "now": now,
            "retry_count": retry_count,
        }
        if status is not RunStatus.FAILED:
            return await self._rowcount("workflow_run_finish", params) == 1
        async with self._tx() as conn:  # a failed run: its webhook outbox rows in the same tx
            if (await conn.execute(Q["workflow_run_finish"], params)).rowcount != 1:
                return False
            await webhook_outbox_workflow_run_failed(conn, workflow_run_id, now)
            return True

    async def workflow_run_retry(
        self,
        tenant: str,
        workflow_run_id: uuid.UUID,
        reset: Collection[TaskRunStatus],
        now: datetime,
        *,
        retry_count: int,
    ) -> bool:
        async with self._tx() as conn:
            params = {
                "tenant": tenant,
                "workflow_run_id": workflow_run_id,
                "now": now,
                "retry_count": retry_count,
            }
            cursor = await conn.execute(Q["workflow_run_retry"], params)
            if cursor.rowcount != 1:
                return False
            await conn.execute(
                Q["workflow_task_runs_reset"],
                {
                    "workflow_run_id": workflow_run_id,
                    "statuses": sorted(str(s) for s in reset),
                    "now": now,
                },
            )
            return True

    async def workflow_task_run_list(self, workflow_run_id: uuid.UUID) -> list[TaskRunRecord]:
        rows = await self._all("workflow_task_run_list", {"workflow_run_id": workflow_run_id})
        return [
            TaskRunRecord(
                **{
                    **r,
                    "status": TaskRunStatus(r["status"]),
                    "depends_on": tuple(r["depends_on"]),
                }
            )
            for r in rows
        ]

    async def workflow_run_trace_context(self, workflow_run_id: uuid.UUID) -> dict[str, str] | None:
        rows = await self._all("workflow_run_trace_context", {"workflow_run_id": workflow_run_id})
        return dict(rows[0]["trace_context"]) if rows else None

    async def workflow_task_run_update(
        self,
        workflow_run_id: uuid.UUID,
        task_name: str,
        expected: Sequence[TaskRunStatus],
        status: TaskRunStatus,
        now: datetime,
        execution_id: uuid.UUID | None = None,
        output: Any = None,
        error: Any = None,
        *,
        retry_count: int,
    ) -> bool:
        params = {
            "workflow_run_id": workflow_run_id,
            "task_name": task_name,
            "expected": [str(s) for s in expected],
            "status": str(status),
            "execution_id": execution_id,
            "output": None if output is None else Jsonb(output),
            "error": None if error is None else Jsonb(error),
            "now": now,
            "retry_count": retry_count,
        }
        return await self._rowcount("workflow_task_run_update", params) == 1

    async def workflow_event_claim(
        self, owner: str, limit: int, lease: timedelta, now: datetime | None = None
    ) -> list[WorkflowEvent]:
        params = {"owner": owner, "limit": limit, "lease": lease, "now": now}
        async with self._tx() as conn:
            cursor = await conn.execute(Q["workflow_event_claim"], params)
            rows = await cursor.fetchall()
        events = [
            WorkflowEvent(
                event_id=r["event_id"],
                execution_id=r["execution_id"],
                workflow_run_id=r["workflow_run_id"],
                status=r["status"],
                created_at=r["created_at"],
            )
            for r in rows
        ]
        return sorted(events, key=lambda e: e.event_id)

    async def workflow_event_delete(self, owner: str, event_ids: Sequence[int]) -> int:
        params = {"owner": owner, "event_ids": list(event_ids)}
        return await self._rowcount("workflow_event_delete", params)


def _run(r: DictRow) -> WorkflowRunRecord:
    return WorkflowRunRecord(**{**r, "status": RunStatus(r["status"])})
