"""Cron jobs and what the cron API answers about them: fire times, occurrences (history),
audit entries, previews, apply plans, manual triggers and backfills."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import Field

from tickwheel.domain.cron_dst import Ambiguous, Nonexistent
from tickwheel.domain.cron_jobs import (
    AuditAction,
    CronJobStatus,
    CronTarget,
    MisfirePolicy,
    Outcome,
    OverlapPolicy,
)
from tickwheel.resources.base import (
    Instant,
    ItemList,
    LocalTime,
    Page,
    Resource,
    omitted_when_none,
)


class FireTime(Resource):
    """A fire time in UTC (``at``) and in the job's zone (``local``); ``dst`` says what a DST
    rule did to it (shifted, first, second, repeated, skipped) and ``reason`` why."""

    at: Instant
    local: LocalTime
    zone: str | None
    fires: bool
    dst: str | None
    reason: str | None


class DstPolicy(Resource):
    nonexistent: Nonexistent
    ambiguous: Ambiguous


class WorkflowTarget(Resource):
    name: str
    version: int | None = Field(description="null: the latest version at every occurrence")


class CronJob(Resource):
    """A durable recurrence rule. Each occurrence becomes one Execution of ``definitionUri``
    or one Workflow Run of ``workflow`` (exactly one of the two is set)."""

    cron_job_id: uuid.UUID
    name: str
    definition_uri: str | None
    definition_version: int | None
    workflow_target: WorkflowTarget | None = Field(alias="workflow")
    inputs: dict[str, Any]
    expression: str
    timezone: str
    dst_policy: DstPolicy
    misfire_policy: MisfirePolicy
    max_catch_up: int
    overlap_policy: OverlapPolicy
    jitter: int = Field(description="seconds (deterministic per occurrence)")
    start_at: Instant | None
    end_at: Instant | None
    target: CronTarget
    definition_version_policy: Literal["latest", "pinned"] | None
    workflow_version_policy: Literal["latest", "pinned"] | None
    status: CronJobStatus
    next_run_at: Instant | None
    last_occurrence: Instant | None
    last_execution_id: uuid.UUID | None
    last_workflow_run_id: uuid.UUID | None
    version: int
    created_at: Instant
    updated_at: Instant
    paused_at: Instant | None
    label: str | None
    fire_times: list[FireTime] | None = omitted_when_none(
        "the next 5 fire times (in a single job's answer, not in lists)", alias="nextFireTimes"
    )

    @property
    def next_fire_times(self) -> list[FireTime]:
        return self.fire_times or []

    @property
    def workflow(self) -> str | None:
        """The name of the workflow each occurrence starts (None for a definition target)."""
        return self.workflow_target.name if self.workflow_target else None

    @property
    def workflow_version(self) -> int | None:
        return self.workflow_target.version if self.workflow_target else None

    @property
    def wire(self) -> dict[str, Any]:
        """Every field as the API sends it."""
        return self.to_wire()


class CronJobPage(Page[CronJob]):
    """Cron jobs by name."""


class Occurrence(Resource):
    """One line of a cron job's history: the execution (or workflow run) an occurrence became,
    or why not."""

    occurrence: Instant
    outcome: Outcome
    execution_id: uuid.UUID | None
    execution_status: str | None
    workflow_run_id: uuid.UUID | None
    workflow_run_status: str | None
    execute_at: Instant | None
    reason: str | None
    recorded_at: Instant


class OccurrencePage(Resource):
    """A cron job's history, newest occurrence first."""

    cron_job_id: uuid.UUID
    items: list[Occurrence]
    next_cursor: str | None


class AuditEntry(Resource):
    action: AuditAction
    actor: str
    at: Instant
    before: dict[str, Any] | None
    after: dict[str, Any] | None


class AuditList(ItemList[AuditEntry]):
    """Who changed a cron job, when, and what it was before and after."""


class Preview(Resource):
    """The next fire times of an expression; nothing is stored."""

    expression: str
    timezone: str
    start: Instant = Field(alias="from")
    dst_policy: DstPolicy
    items: list[FireTime]


class PlanItem(Resource):
    action: Literal["create", "update", "delete", "unchanged"]
    name: str
    cron_job_id: uuid.UUID | None = Field(description="null for a create in a dry run")
    changes: list[str]


class PlanSummary(Resource):
    create: int
    update: int
    delete: int
    unchanged: int


class ApplyResult(Resource):
    """What an apply did (or, with ``dryRun``, would do) to each declared and pruned job;
    ``replayed`` (absent in a dry run): this is the first apply's result, returned again for
    its key."""

    dry_run: bool
    prune: bool
    label: str | None
    plan: list[PlanItem]
    summary: PlanSummary
    replayed: bool | None = omitted_when_none()


class Deleted(Resource):
    deleted: bool
    cron_job: CronJob


class Triggered(Resource):
    """The run a manual trigger made (or found, for the same key again)."""

    cron_job_id: uuid.UUID
    idempotency_key: str
    execution_id: uuid.UUID | None
    workflow_run_id: uuid.UUID | None


class BackfillItem(Resource):
    occurrence: Instant
    created: bool = Field(description="false: it had run already, and was not run again")
    outcome: Outcome
    execution_id: uuid.UUID | None
    workflow_run_id: uuid.UUID | None


class BackfillSummary(Resource):
    created: int
    existing: int


class Backfill(Resource):
    cron_job_id: uuid.UUID
    start: Instant = Field(alias="from")
    end: Instant = Field(alias="to")
    items: list[BackfillItem]
    summary: BackfillSummary
