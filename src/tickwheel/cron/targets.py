"""What an occurrence starts, and what the overlap policy looks at: an Execution of a Job
Definition, or a Workflow Run.

Both go through the Client SDK, never through another service's tables: an execution with
``client.submit``, a workflow run with ``client.workflows.run`` (``POST /v1/workflow-runs``), each
with a stable idempotency key per occurrence, so a tick retried after a crash gets the same
execution or run back instead of a second one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from tickwheel.client.client import AsyncClient
from tickwheel.domain.cron_jobs import CronJob, CronTarget, Outcome
from tickwheel.domain.errors import Conflict, InvalidInput, NotFound
from tickwheel.domain.states import ExecutionStatus

NOT_STARTED = {ExecutionStatus.SCHEDULED, ExecutionStatus.READY}
RUN_UNFINISHED = "RUNNING"
"""A workflow run is RUNNING until it ends SUCCEEDED, FAILED or CANCELLED."""


@dataclass(frozen=True)
class Done:
    """What became of one submitted occurrence."""

    outcome: Outcome
    execution_id: uuid.UUID | None = None
    execute_at: datetime | None = None
    reason: str | None = None
    workflow_run_id: uuid.UUID | None = None

    @property
    def started(self) -> PreviousRun | None:
        """The run this occurrence started, for the next occurrence's overlap check."""
        if self.outcome is not Outcome.SUBMITTED:
            return None
        if self.workflow_run_id is not None:
            return PreviousRun(CronTarget.WORKFLOW, self.workflow_run_id)
        if self.execution_id is not None:
            return PreviousRun(CronTarget.DEFINITION, self.execution_id)
        return None

    def noted(self, note: str | None) -> Done:
        if not note:
            return self
        return Done(self.outcome, self.execution_id, self.execute_at, note, self.workflow_run_id)


@dataclass(frozen=True)
class PreviousRun:
    """The run the previous occurrence became, whichever kind the job targeted then (a job
    switched from a definition to a workflow still waits for its last execution)."""

    kind: CronTarget
    run_id: uuid.UUID
    occurrence: datetime | None = None

    def at(self, occurrence: datetime | None) -> PreviousRun:
        return PreviousRun(self.kind, self.run_id, occurrence)

    def describe(self) -> str:
        what = "workflow run" if self.kind is CronTarget.WORKFLOW else "execution"
        return f"{what} {self.run_id}"


def previous_of(job: CronJob) -> PreviousRun | None:
    if job.last_workflow_run_id is not None:
        return PreviousRun(CronTarget.WORKFLOW, job.last_workflow_run_id, job.last_occurrence)
    if job.last_execution_id is not None:
        return PreviousRun(CronTarget.DEFINITION, job.last_execution_id, job.last_occurrence)
    return None


def workflow_run_key(cron_job_id: uuid.UUID, occurrence: datetime) -> str:
    """``cron-wf:<cronJobId>:<occurrence in UTC, RFC 3339>``: the executions' scheme with its
    own prefix, so that a key says which kind of run it names."""
    return f"cron-wf:{cron_job_id}:{_iso(occurrence)}"


async def unfinished_status(client: AsyncClient, previous: PreviousRun) -> str | None:
    """The previous run's status while it is unfinished; None once finished (or gone)."""
    try:
        if previous.kind is CronTarget.WORKFLOW:
            run = await client.workflows.get_run(previous.run_id)
            status = str(run.status)
            return status if status == RUN_UNFINISHED else None
        info = await client.get(previous.run_id)
    except NotFound:
        return None
    return None if info.finished else str(info.status)


async def cancel_unstarted(client: AsyncClient, previous: PreviousRun, status: str) -> bool:
    """For ``overlapPolicy: replace``: cancels an execution that has not started or asks a
    RUNNING one to stop (its worker stops it and it ends CANCELLED), or cancels a workflow run
    that is still RUNNING (its tasks not started are cancelled, running ones finish). False
    when it could not be cancelled (it ended meanwhile)."""
    if previous.kind is CronTarget.DEFINITION and status not in NOT_STARTED | {"RUNNING"}:
        return False
    try:
        if previous.kind is CronTarget.WORKFLOW:
            await client.workflows.cancel(previous.run_id)
        else:
            await client.cancel(previous.run_id)
    except Conflict:
        return False
    return True


async def start_workflow_run(client: AsyncClient, job: CronJob, occurrence: datetime) -> Done:
    """Starts the occurrence's workflow run. A 409 means the key already names a run (started
    by an earlier tick from an earlier form of the job): the occurrence is materialised, keep
    it. A 422 or 404 (the workflow no longer accepts the inputs, or that version is gone) is
    recorded FAILED with the reason; the job moves on rather than retry the refusal forever."""
    spec = job.spec
    assert spec.workflow_name is not None
    key = workflow_run_key(job.cron_job_id, occurrence)
    try:
        run = await client.workflows.run(
            spec.workflow_name, spec.inputs, key, version=spec.workflow_version
        )
    except Conflict as exc:
        existing = exc.details.get("workflowRunId") if isinstance(exc.details, dict) else None
        if isinstance(existing, str):
            return Done(
                Outcome.SUBMITTED,
                workflow_run_id=uuid.UUID(existing),
                reason="already started by an earlier tick (same idempotency key); kept as it was",
            )
        return Done(Outcome.FAILED, reason=f"the API refused it: {exc.message}")
    except (InvalidInput, NotFound) as exc:
        details = exc.details if isinstance(exc.details, list) else []
        fields = [f"{d.get('path')}: {d.get('message')}" for d in details if isinstance(d, dict)]
        why = "; ".join([exc.message, *fields])
        return Done(Outcome.FAILED, reason=f"the API refused it: {why}")
    return Done(Outcome.SUBMITTED, workflow_run_id=run.workflow_run_id)


def _iso(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")
