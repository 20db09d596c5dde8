"""Cron Jobs as data: the stored rule, its policies, and the history of its occurrences.

Pure, like the rest of ``domain``: the Cron Service (``tickwheel.cron``) decides, the store keeps.
The time math itself is in ``domain/cron.py``; this module only says what a job *is* and which
of its fields are valid, so that the API, the SDK's files and the service agree on one rule set.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from tickwheel.domain.cron import DEFAULT_DST_POLICY, DstPolicy, parse_expression, parse_timezone
from tickwheel.domain.definition_refs import URI_RULE, name_of
from tickwheel.domain.errors import ErrorList, InvalidInput

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
MAX_CATCH_UP_LIMIT = 1000
MAX_JITTER_SECONDS = 3600
DEFAULT_MAX_CATCH_UP = 10


class CronJobStatus(StrEnum):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"


class MisfirePolicy(StrEnum):
    """What to do with occurrences that were due while the service was down or the job paused."""

    SKIP = "skip"
    """Drop them all; continue with the next future occurrence."""
    RUN_ONCE = "run_once"
    """One execution for the latest missed occurrence; the earlier ones are coalesced into it."""
    CATCH_UP = "catch_up"
    """One execution per missed occurrence, oldest first, at most ``maxCatchUp`` of them."""


class OverlapPolicy(StrEnum):
    """What to do when the previous occurrence's execution has not finished yet."""

    ALLOW = "allow"
    FORBID = "forbid"
    """Record this occurrence as skipped."""
    REPLACE = "replace"
    """Cancel the previous execution if it has not started, then run this one."""


class Outcome(StrEnum):
    """What became of one occurrence. Everything except SUBMITTED answers "why didn't my job
    run at 02:30?"; each row carries its reason."""

    SUBMITTED = "SUBMITTED"
    SKIPPED_OVERLAP = "SKIPPED_OVERLAP"
    SKIPPED_MISFIRE = "SKIPPED_MISFIRE"
    COALESCED = "COALESCED"
    SKIPPED_PAUSED = "SKIPPED_PAUSED"
    SKIPPED_DST = "SKIPPED_DST"
    REPLACED = "REPLACED"
    """Recorded on the *previous* occurrence: its execution was cancelled for a newer one."""
    FAILED = "FAILED"
    """The submission was refused (e.g. the definition's latest version no longer accepts the
    job's inputs); the job moves on instead of retrying the same refusal forever."""


class CronTarget(StrEnum):
    """What each occurrence starts: an Execution of a Job Definition, or a Workflow Run."""

    DEFINITION = "definition"
    WORKFLOW = "workflow"


class AuditAction(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    PAUSED = "paused"
    RESUMED = "resumed"
    DELETED = "deleted"


@dataclass(frozen=True)
class CronJobSpec:
    """What a user declares: every field the API, the SDK and ``cron apply`` files can set."""

    name: str
    definition_uri: str | None
    """Set for a job that targets a Job Definition; None when it targets a workflow."""
    expression: str
    timezone: str = "UTC"
    definition_version: int | None = None
    """None: the latest version, resolved again at every occurrence. A number pins it."""
    workflow_name: str | None = None
    """Set for a job that starts a Workflow Run per occurrence (exactly one target is set)."""
    workflow_version: int | None = None
    """Like ``definition_version``: None is the latest workflow version at each occurrence."""
    inputs: dict[str, Any] = field(default_factory=dict)
    dst_policy: DstPolicy = DEFAULT_DST_POLICY
    misfire_policy: MisfirePolicy = MisfirePolicy.RUN_ONCE
    max_catch_up: int = DEFAULT_MAX_CATCH_UP
    overlap_policy: OverlapPolicy = OverlapPolicy.ALLOW
    jitter_seconds: int = 0
    start_at: datetime | None = None
    end_at: datetime | None = None

    @property
    def target(self) -> CronTarget:
        return CronTarget.WORKFLOW if self.workflow_name is not None else CronTarget.DEFINITION

    @property
    def materialised_ahead(self) -> bool:
        """Whether occurrences are materialised a lead ahead. Only executions can wait for
        their ``executeAt``: a workflow run starts when it is created, and a job that forbids or
        replaces overlapping runs must look at the previous run at fire time."""
        return self.target is CronTarget.DEFINITION and self.overlap_policy is OverlapPolicy.ALLOW

    def schedule_key(self) -> tuple[Any, ...]:
        """The fields that decide *when* the job fires: a change to any of them recomputes the
        next run; a change to the others (inputs, policies) does not move it."""
        return (self.expression, self.timezone, self.dst_policy, self.start_at, self.end_at)


@dataclass(frozen=True)
class CronJob:
    cron_job_id: uuid.UUID
    tenant: str
    spec: CronJobSpec
    status: CronJobStatus
    next_run_at: datetime | None
    """The next occurrence not yet materialised; None once ``endAt`` has passed."""
    version: int
    created_at: datetime
    updated_at: datetime
    last_occurrence: datetime | None = None
    last_execution_id: uuid.UUID | None = None
    paused_at: datetime | None = None
    last_workflow_run_id: uuid.UUID | None = None
    """The run of ``last_occurrence`` when it started a workflow (then ``last_execution_id`` is
    None): the overlap policy looks at whichever of the two the previous occurrence became."""
    label: str | None = None
    """The label of the ``cron apply`` that last wrote it (a file, an owner): ``--prune`` deletes
    only its own label's jobs. None: applied without one, or made through the API."""

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class OccurrenceRecord:
    """One line of a cron job's history. ``(cron_job_id, occurrence, outcome)`` is unique, so a
    tick that is retried after a crash records nothing twice."""

    cron_job_id: uuid.UUID
    occurrence: datetime
    outcome: Outcome
    recorded_at: datetime
    execution_id: uuid.UUID | None = None
    execute_at: datetime | None = None
    reason: str | None = None
    record_id: int | None = None
    workflow_run_id: uuid.UUID | None = None
    """The Workflow Run an occurrence of a workflow-targeted job started."""


@dataclass(frozen=True)
class AuditEntry:
    tenant: str
    cron_job_id: uuid.UUID
    name: str
    action: AuditAction
    actor: str
    at: datetime
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    audit_id: int | None = None


def validate_spec(spec: CronJobSpec) -> None:
    """Raises ``InvalidInput`` naming every bad field (API paths: camelCase), before anything is
    stored. The definition's existence and the inputs are checked by the caller, which can read
    the definition registry."""
    errors = ErrorList()
    if not NAME.fullmatch(spec.name):
        errors.add("name", "must be 1-128 letters, digits, '_', '.' or '-', starting alphanumeric")
    _check_target(spec, errors)
    for check in (lambda: parse_expression(spec.expression), lambda: parse_timezone(spec.timezone)):
        try:
            check()
        except InvalidInput as exc:
            errors.items.extend(exc.errors)
    if not 1 <= spec.max_catch_up <= MAX_CATCH_UP_LIMIT:
        errors.add("maxCatchUp", f"must be between 1 and {MAX_CATCH_UP_LIMIT}")
    if not 0 <= spec.jitter_seconds <= MAX_JITTER_SECONDS:
        errors.add("jitter", f"must be between 0 and {MAX_JITTER_SECONDS} seconds")
    for path, value in (("startAt", spec.start_at), ("endAt", spec.end_at)):
        if value is not None and value.tzinfo is None:
            errors.add(path, "must carry a UTC offset (RFC 3339)")
    if (
        spec.start_at is not None
        and spec.end_at is not None
        and spec.start_at.tzinfo is not None
        and spec.end_at.tzinfo is not None
        and spec.end_at <= spec.start_at
    ):
        errors.add("endAt", "must be after startAt")
    if errors.items:
        found = "; ".join(f"{e.path}: {e.message}" for e in errors.items)
        raise InvalidInput(f"the cron job {spec.name!r} is invalid: {found}", errors.items)


def _check_target(spec: CronJobSpec, errors: ErrorList) -> None:
    """Exactly one target. Whether the definition or workflow exists, and whether the inputs
    fit it, needs the registries: the caller checks that."""
    if spec.definition_uri is not None and spec.workflow_name is not None:
        errors.add("workflow", "give either definitionUri or workflow, not both")
        return
    if spec.definition_uri is None and spec.workflow_name is None:
        errors.add("definitionUri", "give either definitionUri (a job definition) or workflow")
        return
    if spec.workflow_name is not None:
        if not NAME.fullmatch(spec.workflow_name):
            errors.add("workflow.name", "must be a workflow name (letters, digits, '_', '.', '-')")
        if spec.workflow_version is not None and spec.workflow_version < 1:
            errors.add("workflow.version", "must be a positive integer, or null for the latest")
        if spec.definition_version is not None:
            errors.add("definitionVersion", "applies to a definition target, not a workflow")
        if spec.jitter_seconds:
            errors.add(
                "jitter",
                "is not available for a workflow target: a workflow run starts when the "
                "occurrence is materialised, so it cannot be delayed like an executeAt",
            )
        return
    if name_of(spec.definition_uri or "") is None:
        errors.add("definitionUri", URI_RULE)
    if spec.workflow_version is not None:
        errors.add("workflow.version", "applies to a workflow target, not a definition")
    if spec.definition_version is not None and spec.definition_version < 1:
        errors.add("definitionVersion", "must be a positive integer, or null for the latest")
