"""Cron rows on SQLite: domain models to query parameters and back (instants are
integer microseconds, JSON is text)."""

from __future__ import annotations

import json
import sqlite3
import uuid
from datetime import datetime
from typing import Any

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
from tickwheel.store.sqlite.codec import from_us, jload, jload_object, opt_us, to_us


def _opt_str(value: uuid.UUID | None) -> str | None:
    return str(value) if value is not None else None


def advance_params(advance: CronAdvance) -> dict[str, Any]:
    return {
        "cron_job_id": str(advance.cron_job_id),
        "expected_version": advance.expected_version,
        "expected_next_run_at": opt_us(advance.expected_next_run_at),
        "next_run_at": opt_us(advance.next_run_at),
        "last_occurrence": opt_us(advance.last_occurrence),
        "last_execution_id": _opt_str(advance.last_execution_id),
        "last_workflow_run_id": _opt_str(advance.last_workflow_run_id),
    }


def _opt_uuid(value: str | None) -> uuid.UUID | None:
    return uuid.UUID(value) if value else None


def job_params(job: CronJob) -> dict[str, Any]:
    s = job.spec
    return {
        "cron_job_id": str(job.cron_job_id),
        "tenant": job.tenant,
        "name": s.name,
        "definition_uri": s.definition_uri,
        "definition_version": s.definition_version,
        "inputs": json.dumps(s.inputs, sort_keys=True),
        "expression": s.expression,
        "timezone": s.timezone,
        "dst_policy": json.dumps(s.dst_policy.to_document(), sort_keys=True),
        "status": str(job.status),
        "misfire_policy": str(s.misfire_policy),
        "max_catch_up": s.max_catch_up,
        "overlap_policy": str(s.overlap_policy),
        "jitter_seconds": s.jitter_seconds,
        "start_at": opt_us(s.start_at),
        "end_at": opt_us(s.end_at),
        "next_run_at": opt_us(job.next_run_at),
        "last_occurrence": opt_us(job.last_occurrence),
        "last_execution_id": _opt_str(job.last_execution_id),
        "last_workflow_run_id": _opt_str(job.last_workflow_run_id),
        "workflow_name": s.workflow_name,
        "workflow_version": s.workflow_version,
        "version": job.version,
        "created_at": to_us(job.created_at),
        "updated_at": to_us(job.updated_at),
        "paused_at": opt_us(job.paused_at),
        "label": job.label,
    }


def _opt_time(value: int | None) -> datetime | None:
    return from_us(value) if value is not None else None


def job_row(r: sqlite3.Row) -> CronJob:
    spec = CronJobSpec(
        name=r["name"],
        definition_uri=r["definition_uri"],
        expression=r["expression"],
        timezone=r["timezone"],
        definition_version=r["definition_version"],
        workflow_name=r["workflow_name"],
        workflow_version=r["workflow_version"],
        inputs=jload_object(r["inputs"]),
        dst_policy=DstPolicy.from_stored(json.loads(r["dst_policy"])),
        misfire_policy=MisfirePolicy(r["misfire_policy"]),
        max_catch_up=r["max_catch_up"],
        overlap_policy=OverlapPolicy(r["overlap_policy"]),
        jitter_seconds=r["jitter_seconds"],
        start_at=_opt_time(r["start_at"]),
        end_at=_opt_time(r["end_at"]),
    )
    last_execution = r["last_execution_id"]
    return CronJob(
        cron_job_id=uuid.UUID(r["cron_job_id"]),
        tenant=r["tenant"],
        spec=spec,
        status=CronJobStatus(r["status"]),
        next_run_at=_opt_time(r["next_run_at"]),
        version=r["version"],
        created_at=from_us(r["created_at"]),
        updated_at=from_us(r["updated_at"]),
        last_occurrence=_opt_time(r["last_occurrence"]),
        last_execution_id=uuid.UUID(last_execution) if last_execution else None,
        paused_at=_opt_time(r["paused_at"]),
        last_workflow_run_id=_opt_uuid(r["last_workflow_run_id"]),
        label=r["label"],
    )


def record_params(record: OccurrenceRecord) -> dict[str, Any]:
    return {
        "cron_job_id": str(record.cron_job_id),
        "occurrence": to_us(record.occurrence),
        "outcome": str(record.outcome),
        "execution_id": _opt_str(record.execution_id),
        "workflow_run_id": _opt_str(record.workflow_run_id),
        "execute_at": opt_us(record.execute_at),
        "reason": record.reason,
        "recorded_at": to_us(record.recorded_at),
    }


def record_row(r: sqlite3.Row) -> OccurrenceRecord:
    execution = r["execution_id"]
    return OccurrenceRecord(
        cron_job_id=uuid.UUID(r["cron_job_id"]),
        occurrence=from_us(r["occurrence"]),
        outcome=Outcome(r["outcome"]),
        recorded_at=from_us(r["recorded_at"]),
        execution_id=uuid.UUID(execution) if execution else None,
        execute_at=_opt_time(r["execute_at"]),
        reason=r["reason"],
        record_id=r["record_id"],
        workflow_run_id=_opt_uuid(r["workflow_run_id"]),
    )


def audit_params(entry: AuditEntry) -> dict[str, Any]:
    return {
        "tenant": entry.tenant,
        "cron_job_id": str(entry.cron_job_id),
        "name": entry.name,
        "action": str(entry.action),
        "actor": entry.actor,
        "at": to_us(entry.at),
        "before": json.dumps(entry.before) if entry.before is not None else None,
        "after": json.dumps(entry.after) if entry.after is not None else None,
    }


def audit_row(r: sqlite3.Row) -> AuditEntry:
    return AuditEntry(
        tenant=r["tenant"],
        cron_job_id=uuid.UUID(r["cron_job_id"]),
        name=r["name"],
        action=AuditAction(r["action"]),
        actor=r["actor"],
        at=from_us(r["at"]),
        before=jload(r["before"]),
        after=jload(r["after"]),
        audit_id=r["audit_id"],
    )
