"""Workflow Definitions and Workflow Runs."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import Field

from tickwheel.domain.workflow_runs import RunStatus, TaskRunStatus
from tickwheel.domain.workflows import TriggerRule
from tickwheel.resources.base import Instant, ItemList, Resource


class WorkflowTask(Resource):
    name: str
    definition: str = Field(description="the Job Definition's URI")
    definition_version: int | None
    inputs: dict[str, Any]
    depends_on: list[str]
    trigger_rule: TriggerRule


class WorkflowDefinition(Resource):
    """A registered workflow: its canonical document, and whose it is (``owner`` null and
    ``shared`` true: the operator's shared registry)."""

    name: str
    version: int
    description: str
    inputs: dict[str, Any]
    tasks: list[WorkflowTask]
    content_hash: str
    created_at: Instant
    owner: str | None
    shared: bool


class WorkflowList(ItemList[WorkflowDefinition]):
    """The latest version of each workflow, by name."""


class TaskRun(Resource):
    name: str
    status: TaskRunStatus
    execution_id: uuid.UUID | None
    output: Any
    error: dict[str, Any] | None
    updated_at: Instant


class WorkflowRun(Resource):
    workflow_run_id: uuid.UUID
    workflow: str
    version: int
    inputs: dict[str, Any]
    status: RunStatus
    idempotency_key: str | None
    retry_count: int
    created_at: Instant
    updated_at: Instant
    finished_at: Instant | None
    tasks: list[TaskRun]
