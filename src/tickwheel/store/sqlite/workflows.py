"""The DAG orchestrator's tables on SQLite.

It shares the main store's one connection and its lock (``SqliteStore.workflows`` builds it),
like the cron tables. Write transactions are ``BEGIN IMMEDIATE``: an outbox claim's
select-then-update is one step even against another process on the same file."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import aiosqlite

from tickwheel.domain.workflow_runs import RunStatus, TaskRunStatus
from tickwheel.store.sqlfile import load_queries
from tickwheel.store.sqlite.codec import from_us, jload, jload_object, to_us
from tickwheel.store.sqlite.connection import SqliteConnection
from tickwheel.store.sqlite.webhooks import webhook_outbox_workflow_run_failed
from tickwheel.store.workflow_protocol import (
    StoredWorkflow,
    TaskRunRecord,
    WorkflowEvent,
    WorkflowRunRecord,
    workflow_run_of_key,
)

_TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})
Q = load_queries("tickwheel.store.sqlite.sql")


class SqliteWorkflowStore(SqliteConnection):
    async def _rowcount(self, query: str, params: dict[str, Any]) -> int:
        async with self._tx() as conn:
            cursor = await conn.execute(Q[query], params)
            return cursor.rowcount

    async def workflow_definition_insert(self, stored: StoredWorkflow) -> bool:
        params = {
            "owner": stored.owner,
            "name": stored.name,
            "version": stored.version,
            "document": json.dumps(stored.document),
            "content_hash": stored.content_hash,
            "created_at": to_us(stored.created_at),
        }
        return await self._rowcount("workflow_definition_insert", params) == 1

    async def workflow_definition_get(
        self, tenant: str, name: str, version: int | None = None
    ) -> StoredWorkflow | None:
        params = {"tenant": tenant, "name": name, "version": version}
        rows = await self._all("workflow_definition_get", params)
        return _definition(rows[0]) if rows else None

    async def workflow_definition_list(self, tenant: str) -> list[StoredWorkflow]:
        rows = await self._all("workflow_definition_list", {"tenant": tenant})
        return [_definition(r) for r in rows]

    async def workflow_run_insert(
        self,
        run: WorkflowRunRecord,
        task_names: Sequence[str],
        depends_on: Mapping[str, Sequence[str]] | None = None,
    ) -> bool:
        upstream = depends_on or {}
        async with self._tx() as conn:
            cursor = await conn.execute(Q["workflow_run_insert"], _run_params(run))
            if cursor.rowcount != 1:
                return False
            for position, name in enumerate(task_names):
                await conn.execute(
                    Q["workflow_task_run_insert"],
                    {
                        "workflow_run_id": str(run.workflow_run_id),
                        "task_name": name,
                        "now": to_us(run.created_at),
                        "position": position,
                        "depends_on": json.dumps(list(upstream.get(name, ()))),
                    },
                )
            return True

    async def workflow_run_list_stalled(
        self,
        grace: timedelta,
        limit: int,
        after: uuid.UUID | None = None,
        now: datetime | None = None,
    ) -> list[uuid.UUID]:
        params = {
            "cutoff": to_us((now or datetime.now(UTC)) - grace),
            "limit": limit,
            "after": None if after is None else str(after),
        }
        return [uuid.UUID(r[0]) for r in await self._all("workflow_run_list_stalled", params)]

    async def workflow_run_get(
        self, tenant: str | None, workflow_run_id: uuid.UUID
    ) -> WorkflowRunRecord | None:
        params = {"tenant": tenant, "workflow_run_id": str(workflow_run_id)}
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
            "workflow_run_id": str(workflow_run_id),
            "status": str(status),
            "now": to_us(now),
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
        run_id = str(workflow_run_id)
        async with self._tx() as conn:
            params = {
                "tenant": tenant,
                "workflow_run_id": run_id,
                "now": to_us(now),
                "retry_count": retry_count,
            }
            cursor = await conn.execute(Q["workflow_run_retry"], params)
            if cursor.rowcount != 1:
                return False
            await conn.execute(
                Q["workflow_task_runs_reset"],
                {
                    "workflow_run_id": run_id,
                    "statuses": json.dumps(sorted(str(s) for s in reset)),
                    "now": to_us(now),
                },
            )
            return True

    async def workflow_task_run_list(self, workflow_run_id: uuid.UUID) -> list[TaskRunRecord]:
        params = {"workflow_run_id": str(workflow_run_id)}
        return [_task(r) for r in await self._all("workflow_task_run_list", params)]

    async def workflow_run_trace_context(self, workflow_run_id: uuid.UUID) -> dict[str, str] | None:
        params = {"workflow_run_id": str(workflow_run_id)}
        rows = await self._all("workflow_run_trace_context", params)
        return dict(json.loads(rows[0]["trace_context"])) if rows else None

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
            "workflow_run_id": str(workflow_run_id),
            "task_name": task_name,
            "expected": json.dumps([str(s) for s in expected]),
            "status": str(status),
            "execution_id": None if execution_id is None else str(execution_id),
            "output": None if output is None else json.dumps(output),
            "error": None if error is None else json.dumps(error),
            "now": to_us(now),
            "retry_count": retry_count,
        }
        return await self._rowcount("workflow_task_run_update", params) == 1

    async def workflow_event_claim(
        self, owner: str, limit: int, lease: timedelta, now: datetime | None = None
    ) -> list[WorkflowEvent]:
        params = {
            "owner": owner,
            "limit": limit,
            "lease_us": to_us(datetime(1970, 1, 1, tzinfo=UTC) + lease),
            "now": to_us(now or datetime.now(UTC)),
        }
        async with self._tx() as conn:
            cursor = await conn.execute(Q["workflow_event_claim"], params)
            rows = await cursor.fetchall()
        return sorted((_event(r) for r in rows), key=lambda e: e.event_id)

    async def workflow_event_delete(self, owner: str, event_ids: Sequence[int]) -> int:
        params = {"owner": owner, "event_ids": json.dumps(list(event_ids))}
        return await self._rowcount("workflow_event_delete", params)


def _run_params(run: WorkflowRunRecord) -> dict[str, Any]:
    return {
        "workflow_run_id": str(run.workflow_run_id),
        "tenant": run.tenant,
        "workflow_name": run.workflow_name,
        "workflow_version": run.workflow_version,
        "inputs": json.dumps(run.inputs),
        "status": str(run.status),
        "idempotency_key": run.idempotency_key,
        "request_hash": run.request_hash,
        "retry_count": run.retry_count,
        "created_at": to_us(run.created_at),
        "updated_at": to_us(run.updated_at),
    }


def _definition(r: sqlite3.Row) -> StoredWorkflow:
    return StoredWorkflow(
        name=r["name"],
        version=r["version"],
        document=json.loads(r["document"]),
        content_hash=r["content_hash"],
        created_at=from_us(r["created_at"]),
        owner=r["owner"],
    )


def _run(r: sqlite3.Row) -> WorkflowRunRecord:
    return WorkflowRunRecord(
        workflow_run_id=uuid.UUID(r["workflow_run_id"]),
        tenant=r["tenant"],
        workflow_name=r["workflow_name"],
        workflow_version=r["workflow_version"],
        inputs=jload_object(r["inputs"]),
        status=RunStatus(r["status"]),
        idempotency_key=r["idempotency_key"],
        request_hash=r["request_hash"],
        retry_count=r["retry_count"],
        created_at=from_us(r["created_at"]),
        updated_at=from_us(r["updated_at"]),
        finished_at=None if r["finished_at"] is None else from_us(r["finished_at"]),
    )


def _task(r: sqlite3.Row) -> TaskRunRecord:
    return TaskRunRecord(
        workflow_run_id=uuid.UUID(r["workflow_run_id"]),
        task_name=r["task_name"],
        status=TaskRunStatus(r["status"]),
        execution_id=None if r["execution_id"] is None else uuid.UUID(r["execution_id"]),
        output=jload(r["output"]),
        error=jload(r["error"]),
        updated_at=from_us(r["updated_at"]),
        position=r["position"],
        depends_on=tuple(json.loads(r["depends_on"])),
    )


def _event(r: sqlite3.Row) -> WorkflowEvent:
    return WorkflowEvent(
        event_id=r["event_id"],
        execution_id=uuid.UUID(r["execution_id"]),
        workflow_run_id=uuid.UUID(r["workflow_run_id"]),
        status=r["status"],
        created_at=from_us(r["created_at"]),
    )


async def workflow_event_record(
    conn: aiosqlite.Connection,
    idempotency_key: str | None,
    execution_id: uuid.UUID | str,
    status: str,
    now_us: int,
) -> bool:
    """Called by the main store inside the transaction that moves an execution to a terminal
    ``status``: adds the outbox row when the execution is a workflow's task run. Executions
    not from workflows pay a string comparison and nothing else (no statement, no trigger)."""
    run_id = workflow_run_of_key(idempotency_key)
    if run_id is None or status not in _TERMINAL:
        return False
    params = {
        "execution_id": str(execution_id),
        "workflow_run_id": str(run_id),
        "status": status,
        "now": now_us,
    }
    await conn.execute(Q["workflow_event_insert"], params)
    return True
