"""Cron rows on PostgreSQL: domain models to query parameters and back."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg.types.json import Jsonb

from tickwheel.domain.cron import DstPolicy
from tickwheel.domain.cron_jobs import (
    AuditAction,
    AuditEntry,
    CronJob,
    CronJobSpec,
    CronJobStatus,
    MisfirePolicy,
    OccurrenceRecord,
    Outcome,
    OverlapPolicy,
)
from tickwheel.store.cron_protocol import CronAdvance

Row = dict[str, Any]


def _aware(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise ValueError("naive datetimes are not stored: attach a timezone")
    return value


def utc(value: datetime | None) -> datetime | None:
    return value.astimezone(UTC) if value is not None else None


def job_params(job: CronJob) -> dict[str, Any]:
    s = job.spec
    return {
        "cron_job_id": job.cron_job_id,
        "tenant": job.tenant,
        "name": s.name,
        "definition_uri": s.definition_uri,
        "definition_version": s.definition_version,
        "inputs": Jsonb(s.inputs),
        "expression": s.expression,
        "timezone": s.timezone,
        "dst_policy": Jsonb(s.dst_policy.to_document()),
        "status": str(job.status),
        "misfire_policy": str(s.misfire_policy),
        "max_catch_up": s.max_catch_up,
        "overlap_policy": str(s.overlap_policy),
        "jitter_seconds": s.jitter_seconds,
        "start_at": _aware(s.start_at),
        "end_at": _aware(s.end_at),
        "next_run_at": _aware(job.next_run_at),
        "last_occurrence": _aware(job.last_occurrence),
        "last_execution_id": job.last_execution_id,
        "last_workflow_run_id": job.last_workflow_run_id,
        "workflow_name": s.workflow_name,
        "workflow_version": s.workflow_version,
        "version": job.version,
        "created_at": _aware(job.created_at),
        "updated_at": _aware(job.updated_at),
        "paused_at": _aware(job.paused_at),
        "label": job.label,
    }


def job_row(r: Row) -> CronJob:
    spec = CronJobSpec(
        name=r["name"],
        definition_uri=r["definition_uri"],
        expression=r["expression"],
        timezone=r["timezone"],
        definition_version=r["definition_version"],
        workflow_name=r["workflow_name"],
        workflow_version=r["workflow_version"],
        inputs=r["inputs"],
        dst_policy=DstPolicy.from_stored(r["dst_policy"]),
        misfire_policy=MisfirePolicy(r["misfire_policy"]),
        max_catch_up=r["max_catch_up"],
        overlap_policy=OverlapPolicy(r["overlap_policy"]),
        jitter_seconds=r["jitter_seconds"],
        start_at=utc(r["start_at"]),
        end_at=utc(r["end_at"]),
    )
    created, updated = utc(r["created_at"]), utc(r["updated_at"])
    assert created is not None and updated is not None
    return CronJob(
        cron_job_id=r["cron_job_id"],
        tenant=r["tenant"],
        spec=spec,
        status=CronJobStatus(r["status"]),
        next_run_at=utc(r["next_run_at"]),
        version=r["version"],
        created_at=created,
        updated_at=updated,
        last_occurrence=utc(r["last_occurrence"]),
        last_execution_id=r["last_execution_id"],
        paused_at=utc(r["paused_at"]),
        last_workflow_run_id=r["last_workflow_run_id"],
        label=r["label"],
    )


def record_row(r: Row) -> OccurrenceRecord:
    occurrence, recorded = utc(r["occurrence"]), utc(r["recorded_at"])
    assert occurrence is not None and recorded is not None
    return OccurrenceRecord(
        cron_job_id=r["cron_job_id"],
        occurrence=occurrence,
        outcome=Outcome(r["outcome"]),
        recorded_at=recorded,
        execution_id=r["execution_id"],
        execute_at=utc(r["execute_at"]),
        reason=r["reason"],
        record_id=r["record_id"],
        workflow_run_id=r["workflow_run_id"],
    )


def audit_params(entry: AuditEntry) -> dict[str, Any]:
    return {
        "tenant": entry.tenant,
        "cron_job_id": entry.cron_job_id,
        "name": entry.name,
        "action": str(entry.action),
        "actor": entry.actor,
        "at": _aware(entry.at),
        "before": Jsonb(entry.before) if entry.before is not None else None,
        "after": Jsonb(entry.after) if entry.after is not None else None,
    }


def audit_row(r: Row) -> AuditEntry:
    at = utc(r["at"])
    assert at is not None
    return AuditEntry(
        tenant=r["tenant"],
        cron_job_id=r["cron_job_id"],
        name=r["name"],
        action=AuditAction(r["action"]),
        actor=r["actor"],
        at=at,
        before=r["before"],
        after=r["after"],
        audit_id=r["audit_id"],
    )


def occurrence_columns(records: Sequence[OccurrenceRecord]) -> dict[str, str]:
    """History rows as one JSON array, for ``json_to_recordset``."""
    rows = [
        {
            "cron_job_id": str(r.cron_job_id),
            "occurrence": as_text(r.occurrence),
            "outcome": str(r.outcome),
            "execution_id": as_text(r.execution_id),
            "execute_at": as_text(r.execute_at),
            "reason": r.reason,
            "recorded_at": as_text(r.recorded_at),
            "workflow_run_id": as_text(r.workflow_run_id),
        }
        for r in records
    ]
    return {"rows": json.dumps(rows)}


def advance_columns(advances: Sequence[CronAdvance]) -> dict[str, str]:
    rows = [
        {
            "cron_job_id": str(a.cron_job_id),
            "expected_version": a.expected_version,
            "expected_next_run_at": as_text(a.expected_next_run_at),
            "next_run_at": as_text(a.next_run_at),
            "last_occurrence": as_text(a.last_occurrence),
            "last_execution_id": as_text(a.last_execution_id),
            "last_workflow_run_id": as_text(a.last_workflow_run_id),
        }
        for a in advances
    ]
    return {"advances": json.dumps(rows)}


def as_text(value: datetime | uuid.UUID | None) -> str | None:
    """An instant (which must carry its offset) or an id as PostgreSQL reads it back."""
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored: attach a timezone")
        return value.isoformat()
    return str(value)
