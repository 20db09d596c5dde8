"""Builders for cron test data: a job states only what the test is about."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime
from typing import Any

from tests.factories import T0
from tickwheel.domain.cron_jobs import (
    AuditAction,
    AuditEntry,
    CronJob,
    CronJobSpec,
    CronJobStatus,
    OccurrenceRecord,
    Outcome,
)
from tickwheel.domain.ids import uuid7


def spec(name: str = "nightly", expression: str = "0 2 * * *", **fields: Any) -> CronJobSpec:
    base = CronJobSpec(
        name=name,
        definition_uri="registry://jobs/greet",
        expression=expression,
        timezone="UTC",
        inputs={"name": "Ada"},
    )
    return replace(base, **fields)


def cron_job(
    tenant: str = "acme",
    *,
    next_run_at: datetime | None = T0,
    status: CronJobStatus = CronJobStatus.ACTIVE,
    version: int = 1,
    at: datetime = T0,
    **spec_fields: Any,
) -> CronJob:
    return CronJob(
        cron_job_id=uuid7(at),
        tenant=tenant,
        spec=spec(**spec_fields),
        status=status,
        next_run_at=next_run_at,
        version=version,
        created_at=at,
        updated_at=at,
    )


def audit(job: CronJob, action: AuditAction = AuditAction.CREATED, at: datetime = T0) -> AuditEntry:
    return AuditEntry(
        tenant=job.tenant,
        cron_job_id=job.cron_job_id,
        name=job.name,
        action=action,
        actor="test",
        at=at,
        before=None,
        after={"name": job.name},
    )


def record(
    job_id: uuid.UUID,
    occurrence: datetime,
    outcome: Outcome = Outcome.SUBMITTED,
    at: datetime = T0,
    **fields: Any,
) -> OccurrenceRecord:
    return OccurrenceRecord(job_id, occurrence, outcome, at, **fields)
