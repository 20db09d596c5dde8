"""Workflow Runs in the API's wire form: the rules are ``tickwheel.app.workflow_runs`` (start,
cancel, retry, advance, record a finished task); this adds the JSON the routes, the dashboard
and the in-process workflows transport answer with. The orchestrator uses the same class, with
the Client SDK of each run's tenant as its task executions."""

from __future__ import annotations

import uuid
from typing import Any

from tickwheel.app.workflow_runs import WorkflowRunService
from tickwheel.app.workflow_tasks import RunState
from tickwheel.client.wire import iso
from tickwheel.store.workflow_protocol import TaskRunRecord, WorkflowRunRecord

Wire = dict[str, Any]


def run_to_wire(run: WorkflowRunRecord, tasks: list[TaskRunRecord]) -> Wire:
    return {
        "workflowRunId": str(run.workflow_run_id),
        "workflow": run.workflow_name,
        "version": run.workflow_version,
        "inputs": run.inputs,
        "status": str(run.status),
        "idempotencyKey": run.idempotency_key,
        "retryCount": run.retry_count,
        "createdAt": iso(run.created_at),
        "updatedAt": iso(run.updated_at),
        "finishedAt": iso(run.finished_at),
        "tasks": [
            {
                "name": t.task_name,
                "status": str(t.status),
                "executionId": None if t.execution_id is None else str(t.execution_id),
                "output": t.output,
                "error": t.error,
                "updatedAt": iso(t.updated_at),
            }
            for t in tasks
        ],
    }


def _wire(state: RunState) -> Wire:
    return run_to_wire(state.run, state.tasks)


class WorkflowRuns(WorkflowRunService):
    """The run rules for one tenant, answering the API's actions as wire values."""

    async def start(
        self,
        name: str,
        version: int | None,
        inputs: dict[str, Any],
        idempotency_key: str | None = None,
    ) -> tuple[Wire, bool]:
        """(wire, True) for a new run (201); the original (False, 200) for the same key and
        body; Conflict for the same key and another body."""
        written = await self.start_run(name, version, inputs, idempotency_key)
        return _wire(written.value), written.created

    async def get(self, workflow_run_id: uuid.UUID) -> Wire:
        return _wire(await self.run_state(workflow_run_id))

    async def cancel(self, workflow_run_id: uuid.UUID) -> Wire:
        return _wire(await self.cancel_run(workflow_run_id))

    async def retry(self, workflow_run_id: uuid.UUID) -> Wire:
        return _wire(await self.retry_run(workflow_run_id))
