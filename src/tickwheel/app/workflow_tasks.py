"""What the run rules act through and answer with: the task executions of a run's tenant (a
port the Client SDK satisfies, so the rules need not import it), a run's state, and the keys that
make every submission and start idempotent."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from tickwheel.domain.states import ExecutionStatus
from tickwheel.observability.tracing import can_continue
from tickwheel.store.workflow_protocol import TaskRunRecord, WorkflowRunRecord, WorkflowStore


def task_key(run: WorkflowRunRecord, task: str) -> str:
    suffix = f":{run.retry_count}" if run.retry_count else ""
    return f"wf:{run.workflow_run_id}:{task}{suffix}"


def request_hash(workflow: str, version: int | None, inputs: dict[str, Any]) -> str:
    body = {"workflow": workflow, "version": version, "inputs": inputs}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


async def run_trace(
    workflows: WorkflowStore, run: WorkflowRunRecord, tasks: dict[str, TaskRunRecord]
) -> dict[str, str] | None:
    """The trace of the run's first traced task, for its later tasks (docs/tracing.md): a run
    has no trace column of its own, and its first tasks were submitted in the starter's context
    (a request, a cron occurrence). Not looked up when nothing could continue it: without otel,
    while a span is current (a retry asked for in a request), or before any task was submitted
    (the start)."""
    if not can_continue() or not any(t.execution_id for t in tasks.values()):
        return None
    return await workflows.workflow_run_trace_context(run.workflow_run_id)


class TaskExecution(Protocol):
    """What the run rules read of a task's execution (the SDK's ``ExecutionInfo`` has it)."""

    @property
    def execution_id(self) -> uuid.UUID: ...
    @property
    def status(self) -> ExecutionStatus: ...
    @property
    def output(self) -> Any: ...
    @property
    def output_reference(self) -> str | None: ...
    @property
    def error(self) -> dict[str, Any] | None: ...
    @property
    def finished(self) -> bool: ...


class TaskExecutions(Protocol):
    """How a run acts on its task executions, for one tenant: the Client SDK bound to it (so a
    task goes through the same submit rules as any other execution)."""

    async def submit(
        self,
        definition: str,
        inputs: dict[str, Any] | None = None,
        execute_at: datetime | None = None,
        idempotency_key: str | None = None,
        *,
        version: int | None = None,
    ) -> TaskExecution: ...

    async def get(self, execution_id: uuid.UUID) -> TaskExecution: ...

    async def cancel(self, execution_id: uuid.UUID) -> TaskExecution: ...

    async def output(self, execution_id: uuid.UUID) -> Any: ...


@dataclass(frozen=True)
class RunState:
    """A run and its task runs in the workflow's document order (the store's order)."""

    run: WorkflowRunRecord
    tasks: list[TaskRunRecord]
