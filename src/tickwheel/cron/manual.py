"""Occurrences on an operator's demand: run a cron job now, once, beside its schedule
(``trigger``), and run the occurrences of a past time range that did not run (``backfill``).

Both submit through the SDK like the Cron Service, so the same validation and idempotency rules
apply, and both record history rows that say who asked.

* A trigger is one extra run with its own key, ``cron-now:<cronJobId>:<token>``: the caller's
  token (the SDK makes one per call and sends it again on a retry, so a retried trigger returns
  the same execution) or, without one, the instant. It never stands for a scheduled occurrence.
* A backfill runs each occurrence of the schedule in ``[from, to]`` under its *own* key, the
  one the service uses (``cron:<cronJobId>:<occurrence>``): an occurrence that already ran is
  found, not run again, and a later tick will not run a backfilled one twice. It is bounded (at
  most ``MAX_BACKFILL`` occurrences, no older than the API's window for a past ``executeAt``,
  not in the future) and it is the operator's explicit decision to run missed occurrences: the
  misfire policy, which decides what runs when nobody asked, does not drop any of them.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from tickwheel.client.client import AsyncClient
from tickwheel.client.cron_wire import Wire
from tickwheel.client.wire import iso
from tickwheel.cron.policies import occurrence_request
from tickwheel.cron.schedule import TINY, Schedule
from tickwheel.cron.targets import start_workflow_run
from tickwheel.domain.clock import Clock
from tickwheel.domain.cron_jobs import CronJob, CronTarget, OccurrenceRecord, Outcome
from tickwheel.domain.errors import Conflict, FieldError, InvalidInput
from tickwheel.domain.submission import SubmitRequest
from tickwheel.store.cron_protocol import CronStore

MAX_BACKFILL = 1000
MAX_AGE = timedelta(days=7)
"""The oldest occurrence a backfill reaches: the API refuses an ``executeAt`` further back."""


async def trigger(
    cron: CronStore,
    client: AsyncClient,
    job: CronJob,
    actor: str,
    clock: Clock,
    token: str | None,
) -> Wire:
    """One extra run of ``job`` now; ``actor`` is named in its history row."""
    now = clock.now()
    token = _token(token) if token is not None else iso(now)
    spec = job.spec
    if spec.target is CronTarget.WORKFLOW:
        _needs_workflows(client)
        assert spec.workflow_name is not None
        key = f"cron-wf-now:{job.cron_job_id}:{token}"
        try:
            run = await client.workflows.run(
                spec.workflow_name, spec.inputs, key, version=spec.workflow_version
            )
            run_id = run.workflow_run_id
        except Conflict as exc:  # the job was edited since the first try: keep that run
            run_id = uuid.UUID(str(_existing(exc, "workflowRunId")))
        record = OccurrenceRecord(
            job.cron_job_id, now, Outcome.SUBMITTED, now,
            workflow_run_id=run_id, reason=f"triggered by hand ({actor})",
        )  # fmt: skip
        await cron.cron_occurrences_record([record])
        return {"cronJobId": str(job.cron_job_id), "idempotencyKey": key,
                "executionId": None, "workflowRunId": str(run_id)}  # fmt: skip
    assert spec.definition_uri is not None
    key = f"cron-now:{job.cron_job_id}:{token}"
    request = SubmitRequest(
        definition_uri=spec.definition_uri,
        inputs=spec.inputs,
        definition_version=spec.definition_version,
        execute_at=now,
        idempotency_key=key,
    )
    [result] = await client.submit_many([request])
    execution_id, created_at = _outcome(result)
    # A retry finds the execution the first try made: its creation instant makes the history
    # row the same one, written once.
    record = OccurrenceRecord(
        job.cron_job_id, created_at or now, Outcome.SUBMITTED, now,
        execution_id=execution_id, execute_at=now, reason=f"triggered by hand ({actor})",
    )  # fmt: skip
    await cron.cron_occurrences_record([record])
    return {"cronJobId": str(job.cron_job_id), "idempotencyKey": key,
            "executionId": str(execution_id), "workflowRunId": None}  # fmt: skip


async def backfill(
    cron: CronStore,
    client: AsyncClient,
    job: CronJob,
    actor: str,
    clock: Clock,
    start: datetime,
    end: datetime,
) -> Wire:
    """The occurrences of ``job`` in ``[start, end]`` that did not run; ``actor`` is named in
    their history rows."""
    now = clock.now()
    occurrences = _occurrences_between(job, start, end, now)
    items: list[Wire] = []
    records: list[OccurrenceRecord] = []
    why = f"backfilled by hand ({actor})"
    if job.spec.target is CronTarget.WORKFLOW:
        _needs_workflows(client)
        for occurrence in occurrences:
            done = await start_workflow_run(client, job, occurrence)
            fresh = done.outcome is Outcome.SUBMITTED and done.reason is None
            items.append(_item(occurrence, fresh, done.outcome, None, done.workflow_run_id))
            if fresh:
                records.append(
                    OccurrenceRecord(job.cron_job_id, occurrence, Outcome.SUBMITTED, now,
                                     workflow_run_id=done.workflow_run_id, reason=why)
                )  # fmt: skip
    else:
        requests = [occurrence_request(job, occurrence, now) for occurrence in occurrences]
        results = await client.submit_many(requests) if requests else []
        for occurrence, request, result in zip(occurrences, requests, results, strict=True):
            execution_id, _ = _outcome(result)
            fresh = result.status == 201
            items.append(_item(occurrence, fresh, Outcome.SUBMITTED, execution_id, None))
            if fresh:
                records.append(
                    OccurrenceRecord(job.cron_job_id, occurrence, Outcome.SUBMITTED, now,
                                     execution_id=execution_id, execute_at=request.execute_at,
                                     reason=why)
                )  # fmt: skip
    await cron.cron_occurrences_record(records)
    created = sum(1 for item in items if item["created"])
    return {
        "cronJobId": str(job.cron_job_id),
        "from": iso(start),
        "to": iso(end),
        "items": items,
        "summary": {"created": created, "existing": len(items) - created},
    }


def _occurrences_between(
    job: CronJob, start: datetime, end: datetime, now: datetime
) -> list[datetime]:
    errors = []
    if start.utcoffset() is None or end.utcoffset() is None:
        errors.append(FieldError("from", "from and to must include a timezone or UTC offset"))
    elif end < start:
        errors.append(FieldError("to", "must not be before from"))
    elif end > now:
        errors.append(FieldError("to", "must not be in the future: the schedule runs those"))
    elif start < now - MAX_AGE:
        errors.append(FieldError("from", f"must be within the last {MAX_AGE.days} days"))
    if errors:
        raise InvalidInput(f"cannot backfill: {errors[0].path} {errors[0].message}", errors)
    window = Schedule(job.spec).window(start - TINY, end, MAX_BACKFILL)
    if not window.complete:
        message = f"covers more than {MAX_BACKFILL} occurrences: backfill a shorter range"
        raise InvalidInput(f"cannot backfill: the range {message}", [FieldError("to", message)])
    return [row.at for row in window.firing]


def _outcome(result: Any) -> tuple[uuid.UUID, datetime | None]:
    """The execution of a batch item: new (201), the same again (200), or made from an
    earlier form of the job (409, kept); a refusal is the caller's error."""
    if result.ok and result.execution is not None:
        return result.execution.execution_id, result.execution.created_at
    error = result.error or {}
    details = error.get("details")
    existing = details.get("executionId") if isinstance(details, dict) else None
    if result.status == 409 and isinstance(existing, str):
        return uuid.UUID(existing), None
    message = str(error.get("message") or "the API refused it")
    fields = details if isinstance(details, list) else []
    raise InvalidInput(
        message,
        [
            FieldError(str(d.get("path")), str(d.get("message")))
            for d in fields
            if isinstance(d, dict)
        ],
    )


def _existing(exc: Conflict, field: str) -> object:
    existing = exc.details.get(field) if isinstance(exc.details, dict) else None
    if existing is None:
        raise exc
    return existing


def _item(
    occurrence: datetime,
    created: bool,
    outcome: Outcome,
    execution_id: uuid.UUID | None,
    run_id: uuid.UUID | None,
) -> Wire:
    return {
        "occurrence": iso(occurrence),
        "created": created,
        "outcome": str(outcome),
        "executionId": str(execution_id) if execution_id else None,
        "workflowRunId": str(run_id) if run_id else None,
    }


def _token(token: str) -> str:
    if not token or len(token) > 100 or "\x00" in token:
        message = "must be 1 to 100 characters, without NUL"
        raise InvalidInput(f"key {message}", [FieldError("key", message)])
    return token


def _needs_workflows(client: AsyncClient) -> None:
    try:
        client.workflows.transport  # noqa: B018 (raises when the client has no workflow API)
    except RuntimeError:
        message = "a job that starts workflow runs is triggered or backfilled through the API"
        raise InvalidInput(message, [FieldError("target", message)]) from None
