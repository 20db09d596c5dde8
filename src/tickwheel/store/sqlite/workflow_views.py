"""The dashboard's read-only workflow views on SQLite, on the main store's connection and lock."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Sequence

from tickwheel.domain.workflow_runs import RunStatus, TaskRunStatus
from tickwheel.store.sqlite.codec import from_us, jload_object
from tickwheel.store.sqlite.connection import SqliteConnection
from tickwheel.store.workflow_protocol import WorkflowRunRecord
from tickwheel.store.workflow_view_protocol import (
    RunTaskStates,
    TaskCount,
    TaskState,
    WorkflowVersions,
)


class SqliteWorkflowViewStore(SqliteConnection):
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
            "before": None if before is None else str(before),
            "limit": limit,
        }
        return [_run(r) for r in await self._all("workflow_view_runs", params)]

    async def workflow_view_task_counts(
        self, workflow_run_ids: Sequence[uuid.UUID]
    ) -> list[TaskCount]:
        if not workflow_run_ids:
            return []
        params = {"workflow_run_ids": json.dumps([str(i) for i in workflow_run_ids])}
        rows = await self._all("workflow_view_task_counts", params)
        return [
            TaskCount(uuid.UUID(r["workflow_run_id"]), TaskRunStatus(r["status"]), r["n"])
            for r in rows
        ]

    async def workflow_view_task_states(
        self, tenant: str, workflow_run_id: uuid.UUID
    ) -> RunTaskStates | None:
        params = {"tenant": tenant, "workflow_run_id": str(workflow_run_id)}
        rows = await self._all("workflow_view_task_states", params)
        if not rows:
            return None
        first = rows[0]
        return RunTaskStates(
            run_status=RunStatus(first["run_status"]),
            retry_count=first["retry_count"],
            finished_at=None if first["finished_at"] is None else from_us(first["finished_at"]),
            tasks=[
                TaskState(
                    task_name=r["task_name"],
                    status=TaskRunStatus(r["status"]),
                    execution_id=None
                    if r["execution_id"] is None
                    else uuid.UUID(r["execution_id"]),
                    execution_status=r["execution_status"],
                    attempt_count=r["attempt_count"],
                    updated_at=from_us(r["updated_at"]),
                )
                for r in rows
            ],
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
