"""How the Cron Service materialises a tick's occurrences through the client: a batch in one
``submit_many`` for jobs that allow overlap, one occurrence at a time for those that forbid or
replace an overlapping run (each checked against the previous run) and for workflow targets.
A refusal of the API is an outcome to record, never a reason to retry the tick."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime
from typing import Any

from tickwheel.client.client import AsyncClient
from tickwheel.cron.policies import Plan, Step, occurrence_request
from tickwheel.cron.targets import (
    Done,
    PreviousRun,
    cancel_unstarted,
    previous_of,
    start_workflow_run,
    unfinished_status,
)
from tickwheel.domain.cron_jobs import CronJob, CronTarget, OccurrenceRecord, Outcome, OverlapPolicy
from tickwheel.domain.errors import Conflict, InvalidInput
from tickwheel.domain.submission import SubmitRequest
from tickwheel.observability import tracing

SUBMIT_CHUNK = 500

Results = dict[tuple[uuid.UUID, datetime], Done]


async def submit_batch(
    client: AsyncClient, jobs: list[CronJob], plans: dict[uuid.UUID, Plan], now: datetime
) -> Results:
    """Jobs that allow overlap: every due occurrence of the batch in one submission."""
    keys = [
        (job, step)
        for job in jobs
        if job.cron_job_id in plans
        for step in plans[job.cron_job_id].steps
        if step.submit
    ]
    if not keys:
        return {}
    # Each occurrence starts a trace of its own (docs/tracing.md), carried in its request: the
    # batch's one submit span would otherwise make a tick's occurrences one trace.
    attributes = [_attributes(job, step.occurrence) for job, step in keys]
    with tracing.new_traces(OCCURRENCE_SPAN, attributes) as spans:
        requests = [
            _traced(occurrence_request(job, step.occurrence, now), span)
            for (job, step), span in zip(keys, spans, strict=True)
        ]
        results = []
        for start in range(0, len(requests), SUBMIT_CHUNK):  # the API takes 1,000 at most
            results += await client.submit_many(requests[start : start + SUBMIT_CHUNK])
        done: Results = {}
        for (job, step), request, result, span in zip(keys, requests, results, spans, strict=True):
            key = (job.cron_job_id, step.occurrence)
            if result.ok and result.execution is not None:
                execution = result.execution
                done[key] = Done(Outcome.SUBMITTED, execution.execution_id, execution.execute_at)
                tracing.mark_submitted(span, [execution.execution_id])
                continue
            error = result.error or {}
            done[key] = refused(result.status, error, request)
    return done


OCCURRENCE_SPAN = "tickwheel.cron.occurrence"


def _traced(request: SubmitRequest, span: Any) -> SubmitRequest:
    """``request`` carrying its occurrence's trace (itself without one)."""
    context = tracing.context_of(span)
    return request if context is None else replace(request, trace_context=context)


def _attributes(job: CronJob, occurrence: datetime) -> dict[str, Any]:
    """What names the occurrence on its span: the job (id and name) and the instant."""
    return {
        tracing.ATTR_CRON_JOB_ID: str(job.cron_job_id),
        tracing.ATTR_CRON_JOB: job.name,
        tracing.ATTR_OCCURRENCE: _iso(occurrence),
    }


def refused(status: int, error: dict[str, object], request: SubmitRequest) -> Done:
    """A 409 means the key already names an execution, made from an earlier form of the job
    (edited since, or a clamped executeAt): the occurrence *is* materialised, keep it. A 422
    means the definition refuses it now; record why and move on rather than retry forever."""
    details = error.get("details")
    existing = details.get("executionId") if isinstance(details, dict) else None
    if status == 409 and isinstance(existing, str):
        return Done(
            Outcome.SUBMITTED,
            uuid.UUID(existing),
            request.execute_at,
            "already materialised by an earlier tick (same idempotency key); kept as it was",
        )
    fields = (
        [f"{d.get('path')}: {d.get('message')}" for d in details or [] if isinstance(d, dict)]
        if isinstance(details, list)
        else []
    )
    why = "; ".join([str(error.get("message")), *fields])
    return Done(Outcome.FAILED, None, None, f"the API refused it: {why}")


async def _submit_one(
    client: AsyncClient, job: CronJob, occurrence: datetime, now: datetime
) -> Done:
    """The occurrence in a trace of its own: its span is current while it is submitted (a
    workflow run's first tasks included), so the submit span is its child."""
    with (
        tracing.new_traces(OCCURRENCE_SPAN, [_attributes(job, occurrence)]) as [span],
        tracing.current(span),
    ):
        done = await _submit_occurrence(client, job, occurrence, now)
        if done.execution_id is not None:
            tracing.mark_submitted(span, [done.execution_id])
        if done.workflow_run_id is not None and span is not None:
            span.set_attribute(tracing.ATTR_WORKFLOW_RUN_ID, str(done.workflow_run_id))
    return done


async def _submit_occurrence(
    client: AsyncClient, job: CronJob, occurrence: datetime, now: datetime
) -> Done:
    if job.spec.target is CronTarget.WORKFLOW:
        return await start_workflow_run(client, job, occurrence)
    request = occurrence_request(job, occurrence, now)
    try:
        info = await client.submit(
            request.definition_uri,
            request.inputs,
            request.execute_at,
            request.idempotency_key,
            version=request.definition_version,
        )
    except Conflict as exc:
        return refused(409, {"message": exc.message, "details": exc.details}, request)
    except InvalidInput as exc:
        return refused(422, {"message": exc.message, "details": exc.details}, request)
    return Done(Outcome.SUBMITTED, info.execution_id, info.execute_at)


async def submit_guarded(
    client: AsyncClient,
    job: CronJob,
    plan: Plan,
    now: datetime,
    extra: list[OccurrenceRecord],
) -> Results:
    """Jobs submitted one occurrence at a time: those that forbid or replace overlapping
    runs, each occurrence checked against the run of the previous one (which may be from
    this very tick: an execution, or a workflow run that is still RUNNING), and jobs that
    start workflow runs (a run has no batch endpoint)."""
    done: Results = {}
    policy = job.spec.overlap_policy
    previous = previous_of(job)
    for step in plan.steps:
        if not step.submit:
            continue
        note: str | None = None
        status = None
        if previous is not None and policy is not OverlapPolicy.ALLOW:
            status = await unfinished_status(client, previous)
        if previous is not None and status is not None:
            if policy is OverlapPolicy.FORBID:
                done[(job.cron_job_id, step.occurrence)] = Done(
                    Outcome.SKIPPED_OVERLAP,
                    reason=f"the previous run ({previous.describe()}, occurrence "
                    f"{_iso(previous.occurrence)}) was still {status}; overlapPolicy forbid",
                )
                continue
            note = await _replace(client, job, previous, status, step, extra, now)
        result = (await _submit_one(client, job, step.occurrence, now)).noted(note)
        done[(job.cron_job_id, step.occurrence)] = result
        if (started := result.started) is not None:
            previous = started.at(step.occurrence)
    return done


async def _replace(
    client: AsyncClient,
    job: CronJob,
    previous: PreviousRun,
    status: str,
    step: Step,
    extra: list[OccurrenceRecord],
    now: datetime,
) -> str | None:
    """Cancels the previous run if it has not started (an execution) or is still RUNNING
    (a workflow run: its tasks not started are cancelled); says so on both occurrences."""
    workflow = previous.kind is CronTarget.WORKFLOW
    if await cancel_unstarted(client, previous, status):
        how = (
            "cancelled while RUNNING"
            if workflow
            else "stopped while RUNNING (its worker cancels it)"
            if status == "RUNNING"
            else f"cancelled before it started ({status})"
        )
        if previous.occurrence is not None:
            extra.append(
                OccurrenceRecord(
                    job.cron_job_id,
                    previous.occurrence,
                    Outcome.REPLACED,
                    now,
                    execution_id=None if workflow else previous.run_id,
                    workflow_run_id=previous.run_id if workflow else None,
                    reason=f"{how} for the run of {_iso(step.occurrence)} (overlapPolicy replace)",
                )
            )
        return f"replaced the previous run ({previous.describe()}), {how}"
    return (
        f"the previous run ({previous.describe()}) had already started and cannot be "
        "cancelled; both run (overlapPolicy replace)"
    )


def _iso(instant: datetime | None) -> str:
    if instant is None:
        return "-"
    return instant.isoformat().replace("+00:00", "Z")
