"""The WorkflowViewStore protocol: the dashboard's read-only views of workflows and their runs.

Kept apart from ``WorkflowStore`` (the orchestrator's hot interface) like ``StatsStore`` is kept
apart from ``Store``: pages and the live run feed read here, nothing here writes. Every read is
bounded: a page of runs walks ``workflow_runs`` in primary-key order (UUIDv7, so newest first
is the key's order) and stops at ``limit``; a run's task states are one query over that run's
task runs, each joined to its execution by primary key."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from tickwheel.domain.workflow_runs import RunStatus, TaskRunStatus
from tickwheel.store.workflow_protocol import WorkflowRunRecord


@dataclass(frozen=True)
class WorkflowVersions:
    """How many versions of a workflow are stored, and the range of their numbers."""

    name: str
    versions: int
    first_version: int
    latest_version: int


@dataclass(frozen=True)
class TaskState:
    """A task run with, once submitted, the live status of its execution."""

    task_name: str
    status: TaskRunStatus
    execution_id: uuid.UUID | None
    execution_status: str | None
    attempt_count: int | None
    updated_at: datetime


@dataclass(frozen=True)
class RunTaskStates:
    """One run's status and every task state, read in one statement."""

    run_status: RunStatus
    retry_count: int
    finished_at: datetime | None
    tasks: list[TaskState]


@dataclass(frozen=True)
class TaskCount:
    workflow_run_id: uuid.UUID
    status: TaskRunStatus
    count: int


class WorkflowViewStore(Protocol):
    async def workflow_view_versions(self, tenant: str) -> list[WorkflowVersions]:
        """Per workflow name the tenant resolves: the count of stored versions, first and latest
        (by name)."""
        ...

    async def workflow_view_runs(
        self,
        tenant: str,
        workflow: str | None,
        status: RunStatus | None,
        before: uuid.UUID | None,
        limit: int,
    ) -> list[WorkflowRunRecord]:
        """The tenant's runs, newest first, older than ``before`` (a keyset cursor); the
        optional filters are exact matches."""
        ...

    async def workflow_view_task_counts(
        self, workflow_run_ids: Sequence[uuid.UUID]
    ) -> list[TaskCount]:
        """Task runs by status for each of the given runs (one grouped query)."""
        ...

    async def workflow_view_task_states(
        self, tenant: str, workflow_run_id: uuid.UUID
    ) -> RunTaskStates | None:
        """The run's status and its task runs with their executions' statuses; None when the
        tenant has no such run."""
        ...
