"""The WorkflowStore protocol: the DAG orchestrator's own tables, beside (never inside) the Store.

Same conventions as ``store/protocol.py`` and ``store/cron_protocol.py``: entity-first names, one
unit of work per method, guarded updates whose row count says who won. The outbox rows
(``workflow_events``) are written by the main Store, inside the transaction that finishes an
execution whose idempotency key starts with ``wf:``; this protocol claims and deletes them.

Every write to a run's task runs, and its finish, names the run's ``retry_count`` the caller
read: a retry resets the task runs and increments the count in one transaction, so a write
decided for an earlier attempt (an advancer that stalled across a retry) changes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from tickwheel.domain.workflow_runs import RunStatus, TaskRunStatus
from tickwheel.store.workflow_keys import WORKFLOW_KEY_PREFIX as WORKFLOW_KEY_PREFIX
from tickwheel.store.workflow_keys import workflow_run_of_key as workflow_run_of_key


@dataclass(frozen=True)
class StoredWorkflow:
    name: str
    version: int
    document: dict[str, Any]
    content_hash: str
    created_at: datetime
    owner: str
    """The tenant that registered it, or '' (``store.protocol.SHARED``): the shared registry."""


@dataclass(frozen=True)
class WorkflowRunRecord:
    workflow_run_id: uuid.UUID
    tenant: str
    workflow_name: str
    workflow_version: int
    inputs: dict[str, Any]
    status: RunStatus
    idempotency_key: str | None
    request_hash: str
    retry_count: int
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None


@dataclass(frozen=True)
class TaskRunRecord:
    workflow_run_id: uuid.UUID
    task_name: str
    status: TaskRunStatus
    execution_id: uuid.UUID | None
    output: Any
    error: Any
    updated_at: datetime
    position: int = 0
    """The task's index in its workflow's ``tasks``: lists come in this order."""
    depends_on: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkflowEvent:
    """An outbox row: an execution of ``workflow_run_id`` entered a terminal ``status``."""

    event_id: int
    execution_id: uuid.UUID
    workflow_run_id: uuid.UUID
    status: str
    created_at: datetime


class WorkflowStore(Protocol):
    # Owned and resolved like Job Definitions (see ``Store.definition_get``): the tenant's own
    # workflow when it owns any version of the name, else the shared one; the tenant '' reads
    # the shared registry alone.
    async def workflow_definition_insert(self, stored: StoredWorkflow) -> bool:
        """False (nothing written) when (owner, name, version) exists already, or when a tenant
        that owns no version of the name asks for a name of the shared registry."""
        ...

    async def workflow_definition_get(
        self, tenant: str, name: str, version: int | None = None
    ) -> StoredWorkflow | None:
        """The workflow ``name`` resolves to for ``tenant``; ``version=None``: its latest."""
        ...

    async def workflow_definition_list(self, tenant: str) -> list[StoredWorkflow]:
        """The latest version of each workflow ``tenant`` resolves, by name."""
        ...

    async def workflow_run_insert(
        self,
        run: WorkflowRunRecord,
        task_names: Sequence[str],
        depends_on: Mapping[str, Sequence[str]] | None = None,
    ) -> bool:
        """The run and one PENDING task run per name (``position`` its index in
        ``task_names``, ``depends_on`` its upstream tasks), in one transaction. False (nothing
        written) when the tenant already has a run with that idempotency key."""
        ...

    async def workflow_run_list_stalled(
        self,
        grace: timedelta,
        limit: int,
        after: uuid.UUID | None = None,
        now: datetime | None = None,
    ) -> list[uuid.UUID]:
        """Up to ``limit`` RUNNING runs (ids above ``after``, ascending) that nobody advanced
        for ``grace``: one has a PENDING task whose upstream tasks (if any) all finished and
        none of which, nor the task itself, changed within ``grace``; or all its tasks finished
        that long ago. ``now=None`` uses the database's clock."""
        ...

    async def workflow_run_get(
        self, tenant: str | None, workflow_run_id: uuid.UUID
    ) -> WorkflowRunRecord | None:
        """``tenant=None``: any tenant (the orchestrator)."""
        ...

    async def workflow_run_get_by_key(
        self, tenant: str, idempotency_key: str
    ) -> WorkflowRunRecord | None: ...

    async def workflow_run_finish(
        self, workflow_run_id: uuid.UUID, status: RunStatus, now: datetime, *, retry_count: int
    ) -> bool:
        """RUNNING -> ``status``; False when the run is no longer RUNNING, or was retried since
        the caller read it (its ``retry_count`` is no longer ``retry_count``)."""
        ...

    async def workflow_run_retry(
        self,
        tenant: str,
        workflow_run_id: uuid.UUID,
        reset: Collection[TaskRunStatus],
        now: datetime,
        *,
        retry_count: int,
    ) -> bool:
        """In one transaction: a FAILED or CANCELLED run at ``retry_count`` back to RUNNING with
        ``retry_count`` + 1, and every task run whose status is in ``reset`` — as it is inside
        the transaction, not as the caller last read it — back to PENDING without execution,
        output or error. False (nothing written) when the run is not FAILED or CANCELLED, or
        was retried since the caller read it."""
        ...

    async def workflow_task_run_list(self, workflow_run_id: uuid.UUID) -> list[TaskRunRecord]:
        """In the workflow's definition order (``position``), on every backend."""
        ...

    async def workflow_run_trace_context(self, workflow_run_id: uuid.UUID) -> dict[str, str] | None:
        """The W3C trace context stored with the run's earliest traced task execution, None
        when none was traced (docs/tracing.md): the run's later tasks continue that trace."""
        ...

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
        """Moves a task run to ``status`` if it is in one of ``expected`` and its run's
        ``retry_count`` is still ``retry_count`` (the attempt the caller read); ``execution_id``
        None keeps the stored one. False when either guard did not match: a write decided
        before a retry must not land on the task runs the retry reset (or kept)."""
        ...

    async def workflow_event_claim(
        self, owner: str, limit: int, lease: timedelta, now: datetime | None = None
    ) -> list[WorkflowEvent]:
        """Up to ``limit`` outbox rows not claimed by a live lease, oldest first, now claimed by
        ``owner`` until ``now + lease``. ``now=None`` uses the database's clock."""
        ...

    async def workflow_event_delete(self, owner: str, event_ids: Sequence[int]) -> int:
        """Deletes consumed rows still claimed by ``owner``; the count deleted."""
        ...
