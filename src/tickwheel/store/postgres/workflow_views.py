"""The dashboard's read-only workflow views on PostgreSQL, on the main store's pool."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from tickwheel.domain.workflow_runs import RunStatus, TaskRunStatus
from tickwheel.store.sqlfile import load_queries
from tickwheel.store.workflow_protocol import WorkflowRunRecord
from tickwheel.store.workflow_view_protocol import (
    RunTaskStates,
    TaskCount,
    TaskState,
    WorkflowVersions,
)

Q = load_queries("tickwheel.store.postgres.sql")
Conn = AsyncConnection[DictRow]


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


class PostgresWorkflowViewStore:
    def __init__(self, pool: AsyncConnectionPool[Conn]) -> None:
        self._pool = pool

    async def _all(self, query: str, params: dict[str, Any]) -> list[DictRow]:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q[query], params)
            return await cursor.fetchall()

    async def workflow_view_versions(self, tenant: str) -> list[WorkflowVersions]:
        rows = await self._all("workflow_view_versions", {"tenant": tenant})
        return [
            WorkflowVersions(r["name"], r["versions"], r["first_version"], r["latest_version"])
            for r in rows
        ]

    async def workflow_view_runs(
        self,
        tenant: str,
        workflow: str | None,
        status: RunStatus | None,
        before: uuid.UUID | None,
        limit: int,
    ) -> list[WorkflowRunRecord]:
        params = {
            "tenant": tenant,
            "workflow": workflow,
            "status": None if status is None else str(status),
            "before": before,
            "limit": limit,
        }
        return [_run(r) for r in await self._all("workflow_view_runs", params)]

    async def workflow_view_task_counts(
        self, workflow_run_ids: Sequence[uuid.UUID]
    ) -> list[TaskCount]:
        if not workflow_run_ids:
            return []
        rows = await self._all(
            "workflow_view_task_counts", {"workflow_run_ids": list(workflow_run_ids)}
        )
        return [TaskCount(r["workflow_run_id"], TaskRunStatus(r["status"]), r["n"]) for r in rows]

    async def workflow_view_task_states(
        self, tenant: str, workflow_run_id: uuid.UUID
    ) -> RunTaskStates | None:
        params = {"tenant": tenant, "workflow_run_id": workflow_run_id}
        rows = await self._all("workflow_view_task_states", params)
        if not rows:
            return None
        first = rows[0]
        return RunTaskStates(
            run_status=RunStatus(first["run_status"]),
            retry_count=first["retry_count"],
            finished_at=_utc(first["finished_at"]),
            tasks=[
                TaskState(
                    task_name=r["task_name"],
                    status=TaskRunStatus(r["status"]),
                    execution_id=r["execution_id"],
                    execution_status=r["execution_status"],
                    attempt_count=r["attempt_count"],
                    updated_at=r["updated_at"].astimezone(UTC),
                )
                for r in rows
            ],
        )


def _run(r: DictRow) -> WorkflowRunRecord:
    return WorkflowRunRecord(
        workflow_run_id=r["workflow_run_id"],
        tenant=r["tenant"],
        workflow_name=r["workflow_name"],
        workflow_version=r["workflow_version"],
        inputs=r["inputs"],
        status=RunStatus(r["status"]),
        idempotency_key=r["idempotency_key"],
        request_hash=r["request_hash"],
        retry_count=r["retry_count"],
        created_at=r["created_at"].astimezone(UTC),
        updated_at=r["updated_at"].astimezone(UTC),
        finished_at=_utc(r["finished_at"]),
    )
