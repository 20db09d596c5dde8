"""What pausing a cron job does to the occurrences it already materialised.

The Cron Service submits an occurrence up to its lead (60 s by default) ahead of time, so at the
moment of a pause the next minute of a frequent job already exists as SCHEDULED (or, just due,
READY) executions. A pause means "nothing more of this job runs", so those are cancelled too:
only executions of this job (the idempotency key ``cron:<cronJobId>:<occurrence>``), only in
the job's tenant, only while they have not started (a guarded cancel from SCHEDULED or READY;
one a worker claimed first runs to its end). Each one cancelled is recorded in the job's
history as SKIPPED_PAUSED with its execution and the reason.

Deleting a job does the same (without the history, which goes with the job). A tick that
claimed the job before the pause and submits after its sweep loses its advance on the job's
version; it then cancels what it submitted (``cancel_submitted``), so nothing slips through.

Resuming does not bring them back: their idempotency keys name the cancelled executions, and
the job's ``next_run_at`` is already past them, so the misfire and catch-up rules of a resume
apply to the occurrences that were never materialised, and nothing is submitted twice."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from tickwheel.client.client import AsyncClient
from tickwheel.client.wire import iso
from tickwheel.cron.policies import RECORD_LIMIT, idempotency_key
from tickwheel.cron.schedule import TINY, Schedule
from tickwheel.domain.cron_jobs import CronJob, OccurrenceRecord, Outcome
from tickwheel.domain.errors import Conflict, NotFound
from tickwheel.domain.models import Execution, ExecutionFilter
from tickwheel.domain.states import ExecutionStatus
from tickwheel.store.cron_protocol import CronStore
from tickwheel.store.protocol import Store

PAGE = 200
UNSTARTED = (ExecutionStatus.SCHEDULED, ExecutionStatus.READY)


def key_prefix(cron_job_id: uuid.UUID) -> str:
    """The idempotency keys of one job's occurrences (``policies.idempotency_key``)."""
    return f"cron:{cron_job_id}:"


async def cancel_materialised(
    cron: CronStore, store: Store, job: CronJob, now: datetime, *, record: bool = True
) -> list[OccurrenceRecord]:
    """Cancels the job's occurrences that exist and have not started, records each in its
    history (``record``: a deleted job has none left), and returns those records. Safe to run
    again (a retried pause): what is already cancelled is no longer found, and a history row
    is written at most once."""
    flt = ExecutionFilter(statuses=UNSTARTED, idempotency_key_prefix=key_prefix(job.cron_job_id))
    records: list[OccurrenceRecord] = []
    before: uuid.UUID | None = None
    while True:
        page = await store.execution_list(job.tenant, flt, before, PAGE)
        for execution in page:
            occurrence = occurrence_of(job.cron_job_id, execution)
            if occurrence is None:
                continue  # a key someone chose by hand that only looks like ours
            # Guarded: a worker that claimed it since the list was read wins, and it runs.
            if await store.execution_cancel_unstarted(job.tenant, execution.execution_id, now):
                records.append(_record(job, occurrence, execution, now))
        if len(page) < PAGE:
            break
        before = page[-1].execution_id
    if records and record:
        await cron.cron_occurrences_record(records)
    return records


async def cancel_materialised_many(
    store: Store, tenant: str, cron_job_ids: set[uuid.UUID], now: datetime
) -> int:
    """``cancel_materialised`` for many deleted jobs at once (a ``cron apply --prune``): one
    pass over the tenant's unstarted cron executions (a lead's worth per active job at most)
    instead of one per job, cancelling those whose key names one of ``cron_job_ids``. Their
    history went with the jobs: nothing is recorded. Returns how many were cancelled."""
    if not cron_job_ids:
        return 0
    flt = ExecutionFilter(statuses=UNSTARTED, idempotency_key_prefix="cron:")
    cancelled = 0
    before: uuid.UUID | None = None
    while True:
        page = await store.execution_list(tenant, flt, before, PAGE)
        for execution in page:
            owner = _job_of(execution)
            if owner not in cron_job_ids or occurrence_of(owner, execution) is None:
                continue
            if await store.execution_cancel_unstarted(tenant, execution.execution_id, now):
                cancelled += 1
        if len(page) < PAGE:
            return cancelled
        before = page[-1].execution_id


def _job_of(execution: Execution) -> uuid.UUID | None:
    """The cron job a ``cron:<cronJobId>:<occurrence>`` key names, if it has that form."""
    parts = (execution.idempotency_key or "").split(":", 2)
    try:
        return uuid.UUID(parts[1]) if len(parts) == 3 else None
    except ValueError:
        return None


async def cancel_submitted(
    client: AsyncClient,
    cron: CronStore,
    job: CronJob,
    records: Sequence[OccurrenceRecord],
    *,
    record: bool = True,
) -> list[OccurrenceRecord]:
    """The other half of a pause: a tick that claimed the job before the pause and submitted
    after its sweep. The service calls this when its advance lost to a pause (or a delete);
    the executions its records name are cancelled if they have not started, like the sweep's.
    The service sees executions only through the client, so it reads the status first and
    cancels only SCHEDULED or READY ones (a cancel would also take RETRY_WAIT)."""
    cancelled: list[OccurrenceRecord] = []
    for row in records:
        if row.outcome is not Outcome.SUBMITTED or row.execution_id is None:
            continue
        try:
            info = await client.get(row.execution_id)
            if info.status not in UNSTARTED:
                continue
            await client.cancel(row.execution_id)
        except (Conflict, NotFound):
            continue  # claimed, finished or gone meanwhile: it is not ours to stop
        cancelled.append(
            OccurrenceRecord(
                job.cron_job_id,
                row.occurrence,
                Outcome.SKIPPED_PAUSED,
                row.recorded_at,
                execution_id=row.execution_id,
                execute_at=info.execute_at,
                reason=_reason(info.status),
            )
        )
    if cancelled and record:
        await cron.cron_occurrences_record(cancelled)
    return cancelled


def occurrence_of(cron_job_id: uuid.UUID, execution: Execution) -> datetime | None:
    """The occurrence an execution of this job was materialised for, read back from its key;
    None unless the key is exactly the one the service would have made for it."""
    key = execution.idempotency_key or ""
    try:
        occurrence = datetime.fromisoformat(key.removeprefix(key_prefix(cron_job_id)))
    except ValueError:
        return None
    if occurrence.tzinfo is None or idempotency_key(cron_job_id, occurrence) != key:
        return None
    return occurrence


def _record(
    job: CronJob, occurrence: datetime, execution: Execution, now: datetime
) -> OccurrenceRecord:
    return OccurrenceRecord(
        job.cron_job_id,
        occurrence,
        Outcome.SKIPPED_PAUSED,
        now,
        execution_id=execution.execution_id,
        execute_at=execution.execute_at,
        reason=_reason(execution.status),
    )


def _reason(status: ExecutionStatus) -> str:
    return (
        f"the job was paused before this occurrence started: its execution (then {status}) "
        "was cancelled; a resume does not run it again"
    )


def paused_records(job: CronJob, now: datetime) -> list[OccurrenceRecord]:
    """A resume without catch-up: each occurrence missed while paused, SKIPPED_PAUSED (the
    newest ``RECORD_LIMIT``, and one row standing for the older ones)."""
    assert job.next_run_at is not None
    reason = f"the job was paused (since {iso(job.paused_at)}) and resumed without catch-up"
    tail, earlier = Schedule(job.spec).last_firing(job.next_run_at - TINY, now, RECORD_LIMIT)
    rows = [
        OccurrenceRecord(job.cron_job_id, r.at, Outcome.SKIPPED_PAUSED, now, reason=reason)
        for r in tail.firing
    ]
    if earlier and rows:
        summary = f"{reason}; this row stands for every occurrence from {iso(job.next_run_at)} "
        summary += f"up to {iso(rows[0].occurrence)}, too many to list one by one"
        rows.insert(
            0,
            OccurrenceRecord(
                job.cron_job_id, job.next_run_at, Outcome.SKIPPED_PAUSED, now, reason=summary
            ),
        )
    return rows
