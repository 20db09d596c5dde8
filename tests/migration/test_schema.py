"""Migrations equal the schema (STYLE.md): all migrations applied to an EMPTY database give
exactly the schema written out below, on each backend, and the two backends agree with each other.

The expected schemas are snapshots kept here on purpose: a migration that changes the schema must
change this file too, in the same review. Each column is written ``TYPE`` or ``TYPE NOT NULL``
(types normalised: SQLite's declared type, PostgreSQL's ``format_type`` with ``timestamptz`` for
``timestamp with time zone``); each index ``columns [WHERE predicate]``."""

from __future__ import annotations

import re
import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tickwheel.store.factory import open_store
from tickwheel.store.migrate import load_migrations
from tickwheel.store.protocol import Store
from tickwheel.store.sqlite.store import SqliteStore

Schema = dict[str, dict[str, Any]]

# -- the expected schemas -------------------------------------------------------------------------

SQLITE_SCHEMA: Schema = {
    "api_keys": {
        "columns": {
            # NOT NULL is written out: SQLite lets a TEXT PRIMARY KEY hold NULL otherwise.
            "key_id": "TEXT NOT NULL",
            "tenant": "TEXT NOT NULL",
            "scope": "TEXT NOT NULL",
            "name": "TEXT NOT NULL",
            "key_hash": "TEXT NOT NULL",
            "created_at": "INTEGER NOT NULL",
            "revoked_at": "INTEGER",
        },
        "primary_key": "key_id",
        "unique": ["key_hash"],
        "indexes": {},
        "foreign_keys": [],
    },
    "attempts": {
        "columns": {
            "execution_id": "TEXT NOT NULL",
            "attempt_number": "INTEGER NOT NULL",
            "worker_id": "TEXT NOT NULL",
            "fencing_token": "INTEGER NOT NULL",
            "status": "TEXT NOT NULL",
            "started_at": "INTEGER NOT NULL",
            "finished_at": "INTEGER",
            "error": "TEXT",
        },
        "primary_key": "execution_id, attempt_number",
        "unique": [],
        "indexes": {},
        "foreign_keys": ["execution_id -> executions(execution_id) ON DELETE CASCADE"],
    },
    "counters": {
        "columns": {
            "name": "TEXT NOT NULL",
            "value": "INTEGER NOT NULL",
        },
        "primary_key": "name",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "concurrency_holds": {
        "columns": {
            "tenant": "TEXT NOT NULL",
            "definition_uri": "TEXT NOT NULL",
            "concurrency_key": "TEXT NOT NULL",
            "slot": "INTEGER NOT NULL",
            "execution_id": "TEXT NOT NULL",
        },
        "primary_key": "tenant, definition_uri, concurrency_key, slot",
        "unique": [],
        "indexes": {"concurrency_holds_execution": "execution_id"},
        "foreign_keys": [],
    },
    "cron_applies": {
        "columns": {
            "tenant": "TEXT NOT NULL",
            "apply_key": "TEXT NOT NULL",
            "request_hash": "TEXT NOT NULL",
            "result": "TEXT",
            "started_at": "INTEGER NOT NULL",
        },
        "primary_key": "tenant, apply_key",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "cron_audit": {
        "columns": {
            "audit_id": "INTEGER NOT NULL",  # INTEGER PRIMARY KEY: the rowid, never NULL
            "tenant": "TEXT NOT NULL",
            "cron_job_id": "TEXT NOT NULL",
            "name": "TEXT NOT NULL",
            "action": "TEXT NOT NULL",
            "actor": "TEXT NOT NULL",
            "at": "INTEGER NOT NULL",
            "before": "TEXT",
            "after": "TEXT",
        },
        "primary_key": "audit_id",
        "unique": [],
        "indexes": {"cron_audit_job": "tenant, cron_job_id, audit_id"},
        "foreign_keys": [],
    },
    "cron_jobs": {
        "columns": {
            "cron_job_id": "TEXT NOT NULL",
            "tenant": "TEXT NOT NULL",
            "name": "TEXT NOT NULL",
            "definition_uri": "TEXT",
            "definition_version": "INTEGER",
            "inputs": "TEXT NOT NULL",
            "expression": "TEXT NOT NULL",
            "timezone": "TEXT NOT NULL",
            "dst_policy": "TEXT NOT NULL",
            "status": "TEXT NOT NULL",
            "misfire_policy": "TEXT NOT NULL",
            "max_catch_up": "INTEGER NOT NULL",
            "overlap_policy": "TEXT NOT NULL",
            "jitter_seconds": "INTEGER NOT NULL",
            "start_at": "INTEGER",
            "end_at": "INTEGER",
            "next_run_at": "INTEGER",
            "last_occurrence": "INTEGER",
            "last_execution_id": "TEXT",
            "claimed_by": "TEXT",
            "claim_expires_at": "INTEGER",
            "version": "INTEGER NOT NULL",
            "created_at": "INTEGER NOT NULL",
            "updated_at": "INTEGER NOT NULL",
            "paused_at": "INTEGER",
            "workflow_name": "TEXT",
            "workflow_version": "INTEGER",
            "last_workflow_run_id": "TEXT",
            "label": "TEXT",
        },
        "primary_key": "cron_job_id",
        "unique": ["tenant, name"],
        "indexes": {
            "cron_jobs_due": "next_run_at WHERE status = 'ACTIVE'",
            "cron_jobs_label": "tenant, label, name",
        },
        "foreign_keys": [],
    },
    "cron_occurrences": {
        "columns": {
            "record_id": "INTEGER NOT NULL",  # INTEGER PRIMARY KEY: the rowid, never NULL
            "cron_job_id": "TEXT NOT NULL",
            "occurrence": "INTEGER NOT NULL",
            "outcome": "TEXT NOT NULL",
            "execution_id": "TEXT",
            "execute_at": "INTEGER",
            "reason": "TEXT",
            "recorded_at": "INTEGER NOT NULL",
            "workflow_run_id": "TEXT",
        },
        "primary_key": "record_id",
        "unique": ["cron_job_id, occurrence, outcome"],
        "indexes": {},
        "foreign_keys": ["cron_job_id -> cron_jobs(cron_job_id) ON DELETE CASCADE"],
    },
    "dashboard_sessions": {
        "columns": {
            "session_hash": "TEXT NOT NULL",
            "key_id": "TEXT",
            "created_at": "INTEGER NOT NULL",
            "expires_at": "INTEGER NOT NULL",
        },
        "primary_key": "session_hash",
        "unique": [],
        "indexes": {"dashboard_sessions_expires": "expires_at"},
        "foreign_keys": ["key_id -> api_keys(key_id) ON DELETE CASCADE"],
    },
    "definitions": {
        "columns": {
            "name": "TEXT NOT NULL",
            "version": "INTEGER NOT NULL",
            "document": "TEXT NOT NULL",
            "content_hash": "TEXT NOT NULL",
            "created_at": "INTEGER NOT NULL",
            "owner": "TEXT NOT NULL",
        },
        "primary_key": "owner, name, version",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "execution_events": {
        "columns": {
            "event_id": "INTEGER NOT NULL",  # INTEGER PRIMARY KEY: the rowid, never NULL
            "execution_id": "TEXT NOT NULL",
            "kind": "TEXT NOT NULL",
            "at": "INTEGER NOT NULL",
            "detail": "TEXT NOT NULL",
        },
        "primary_key": "event_id",
        "unique": [],
        "indexes": {"execution_events_execution": "execution_id, event_id"},
        "foreign_keys": ["execution_id -> executions(execution_id) ON DELETE CASCADE"],
    },
    "execution_outputs": {
        "columns": {
            "execution_id": "TEXT NOT NULL",
            "output": "TEXT NOT NULL",
            "size_bytes": "INTEGER NOT NULL",
            "created_at": "INTEGER NOT NULL",
        },
        "primary_key": "execution_id",
        "unique": [],
        "indexes": {},
        "foreign_keys": ["execution_id -> executions(execution_id) ON DELETE CASCADE"],
    },
    "executions": {
        "columns": {
            "execution_id": "TEXT NOT NULL",
            "tenant": "TEXT NOT NULL",
            "definition_uri": "TEXT NOT NULL",
            "definition_version": "INTEGER NOT NULL",
            "input_snapshot": "TEXT NOT NULL",
            "execute_at": "INTEGER NOT NULL",
            "bucket_start": "INTEGER NOT NULL",
            "shard_id": "INTEGER NOT NULL",
            "idempotency_key": "TEXT",
            "request_fingerprint": "TEXT",
            "status": "TEXT NOT NULL",
            "priority": "INTEGER NOT NULL",
            "attempt_count": "INTEGER NOT NULL",
            "max_attempts": "INTEGER NOT NULL",
            "next_attempt_at": "INTEGER",
            "ready_at": "INTEGER",
            "lease_owner": "TEXT",
            "lease_expires_at": "INTEGER",
            "fencing_token": "INTEGER",
            "output": "TEXT",
            "output_reference": "TEXT",
            "error": "TEXT",
            "created_at": "INTEGER NOT NULL",
            "updated_at": "INTEGER NOT NULL",
            "started_at": "INTEGER",
            "finished_at": "INTEGER",
            "cancel_requested_at": "INTEGER",
            "progress": "TEXT",
            "checkpoint": "TEXT",
            "trace_context": "TEXT",
            "start_by": "INTEGER",
            "deadline": "INTEGER",
            "concurrency_key": "TEXT",
            "concurrency_limit": "INTEGER",
            "concurrency_order": "TEXT",
        },
        "primary_key": "execution_id",
        "unique": ["tenant, idempotency_key"],
        "indexes": {
            "executions_concurrency_queue": "tenant, definition_uri, concurrency_key, execute_at,"
            " execution_id WHERE concurrency_limit IS NOT NULL"
            " AND status IN ('SCHEDULED', 'READY', 'RUNNING', 'RETRY_WAIT')",
            "executions_due": "shard_id, bucket_start, execute_at WHERE status = 'SCHEDULED'",
            "executions_ready": "priority DESC, ready_at WHERE status = 'READY'",
            "executions_ready_tenant": "tenant, priority DESC, ready_at WHERE status = 'READY'",
            "executions_running_lease": "lease_expires_at WHERE status = 'RUNNING'",
            "executions_retry_due": "next_attempt_at WHERE status = 'RETRY_WAIT'",
            "executions_tenant_list": "tenant, execution_id",
            "executions_tenant_status": "tenant, status, execution_id",
            "executions_tenant_definition": "tenant, definition_uri, execution_id",
            "executions_finished": "finished_at"
            " WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED')",
            "executions_start_by": "start_by WHERE status IN ('SCHEDULED', 'READY')"
            " AND started_at IS NULL AND start_by IS NOT NULL",
            "executions_deadline": "deadline WHERE status IN ('SCHEDULED', 'READY')"
            " AND started_at IS NULL AND deadline IS NOT NULL",
        },
        "foreign_keys": [],
    },
    "shard_leases": {
        "columns": {
            "shard_id": "INTEGER NOT NULL",
            "owner": "TEXT",
            "epoch": "INTEGER NOT NULL",
            "expires_at": "INTEGER",
            "watermark": "INTEGER",
            "updated_at": "INTEGER NOT NULL",
            "due_through": "INTEGER",
        },
        "primary_key": "shard_id",
        "unique": [],
        "indexes": {"shard_leases_open": "shard_id, due_through WHERE due_through IS NOT NULL"},
        "foreign_keys": [],
    },
    "shard_owners": {
        "columns": {
            "owner": "TEXT NOT NULL",
            "expires_at": "INTEGER NOT NULL",
            "updated_at": "INTEGER NOT NULL",
        },
        "primary_key": "owner",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "tickwheel_migrations": {
        "columns": {
            "version": "INTEGER NOT NULL",  # INTEGER PRIMARY KEY: the rowid
            "name": "TEXT NOT NULL",
            "checksum": "TEXT NOT NULL",
            "applied_at": "INTEGER NOT NULL",
        },
        "primary_key": "version",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "workers": {
        "columns": {
            "worker_id": "TEXT NOT NULL",
            "host": "TEXT NOT NULL",
            "pid": "INTEGER NOT NULL",
            "concurrency": "INTEGER NOT NULL",
            "started_at": "INTEGER NOT NULL",
            "last_heartbeat_at": "INTEGER NOT NULL",
            "running": "INTEGER NOT NULL",
            "stopped_at": "INTEGER",
        },
        "primary_key": "worker_id",
        "unique": [],
        "indexes": {"workers_last_heartbeat": "last_heartbeat_at"},
        "foreign_keys": [],
    },
    "workflow_definitions": {
        "columns": {
            "name": "TEXT NOT NULL",
            "version": "INTEGER NOT NULL",
            "document": "TEXT NOT NULL",
            "content_hash": "TEXT NOT NULL",
            "created_at": "INTEGER NOT NULL",
            "owner": "TEXT NOT NULL",
        },
        "primary_key": "owner, name, version",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "workflow_events": {
        "columns": {
            "event_id": "INTEGER NOT NULL",
            "execution_id": "TEXT NOT NULL",
            "workflow_run_id": "TEXT NOT NULL",
            "status": "TEXT NOT NULL",
            "created_at": "INTEGER NOT NULL",
            "claimed_by": "TEXT",
            "claim_expires_at": "INTEGER",
        },
        "primary_key": "event_id",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "workflow_runs": {
        "columns": {
            "workflow_run_id": "TEXT NOT NULL",
            "tenant": "TEXT NOT NULL",
            "workflow_name": "TEXT NOT NULL",
            "workflow_version": "INTEGER NOT NULL",
            "inputs": "TEXT NOT NULL",
            "status": "TEXT NOT NULL",
            "idempotency_key": "TEXT",
            "request_hash": "TEXT NOT NULL",
            "retry_count": "INTEGER NOT NULL",
            "created_at": "INTEGER NOT NULL",
            "updated_at": "INTEGER NOT NULL",
            "finished_at": "INTEGER",
        },
        "primary_key": "workflow_run_id",
        "unique": [],
        "indexes": {
            "workflow_runs_key": "tenant, idempotency_key WHERE idempotency_key IS NOT NULL",
            "workflow_runs_running": "updated_at WHERE status = 'RUNNING'",
        },
        "foreign_keys": [],
    },
    "workflow_task_runs": {
        "columns": {
            "workflow_run_id": "TEXT NOT NULL",
            "task_name": "TEXT NOT NULL",
            "status": "TEXT NOT NULL",
            "execution_id": "TEXT",
            "output": "TEXT",
            "error": "TEXT",
            "updated_at": "INTEGER NOT NULL",
            "position": "INTEGER NOT NULL",
            "depends_on": "TEXT NOT NULL",
        },
        "primary_key": "workflow_run_id, task_name",
        "unique": [],
        "indexes": {"workflow_task_runs_pending": "updated_at WHERE status = 'PENDING'"},
        "foreign_keys": ["workflow_run_id -> workflow_runs(workflow_run_id) ON DELETE CASCADE"],
    },
    "rate_limits": {
        "columns": {
            "tenant": "TEXT NOT NULL",
            "definition_uri": "TEXT NOT NULL",
            "rate_limit": "INTEGER NOT NULL",
            "period_seconds": "REAL NOT NULL",
            "burst": "INTEGER NOT NULL",
            "definition_version": "INTEGER",
            "tokens": "REAL NOT NULL",
            "refilled_at": "INTEGER NOT NULL",
            "updated_at": "INTEGER NOT NULL",
        },
        "primary_key": "tenant, definition_uri",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "tenant_weights": {
        "columns": {
            "tenant": "TEXT NOT NULL",
            "weight": "INTEGER NOT NULL",
            "updated_at": "INTEGER NOT NULL",
        },
        "primary_key": "tenant",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "pauses": {
        "columns": {
            "tenant": "TEXT NOT NULL",
            "definition_uri": "TEXT NOT NULL",
            "kind": "TEXT NOT NULL",
            "reason": "TEXT NOT NULL",
            "paused_at": "INTEGER NOT NULL",
            "probe_execution_id": "TEXT",
        },
        "primary_key": "tenant, definition_uri, kind",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "circuit_breakers": {
        "columns": {
            "tenant": "TEXT NOT NULL",
            "definition_uri": "TEXT NOT NULL",
            "state": "TEXT NOT NULL",
            "consecutive_failures": "INTEGER NOT NULL",
            "recent": "TEXT NOT NULL",
            "cool_down_until": "INTEGER",
            "probe_execution_id": "TEXT",
            "updated_at": "INTEGER NOT NULL",
        },
        "primary_key": "tenant, definition_uri",
        "unique": [],
        "indexes": {"circuit_breakers_tripped": "cool_down_until WHERE state <> 'closed'"},
        "foreign_keys": [],
    },
    "circuit_breaker_transitions": {
        "columns": {
            "transition_id": "INTEGER NOT NULL",
            "tenant": "TEXT NOT NULL",
            "definition_uri": "TEXT NOT NULL",
            "from_state": "TEXT NOT NULL",
            "to_state": "TEXT NOT NULL",
            "reason": "TEXT NOT NULL",
            "at": "INTEGER NOT NULL",
        },
        "primary_key": "transition_id",
        "unique": [],
        "indexes": {
            "circuit_breaker_transitions_definition": "tenant, definition_uri, transition_id"
        },
        "foreign_keys": [],
    },
    "webhook_deliveries": {
        "columns": {
            "delivery_id": "TEXT NOT NULL",
            "webhook_id": "TEXT NOT NULL",
            "tenant": "TEXT NOT NULL",
            "event": "TEXT NOT NULL",
            "payload": "TEXT NOT NULL",
            "status": "TEXT NOT NULL",
            "attempts": "INTEGER NOT NULL",
            "next_attempt_at": "INTEGER",
            "lease_owner": "TEXT",
            "lease_expires_at": "INTEGER",
            "response_code": "INTEGER",
            "last_error": "TEXT",
            "created_at": "INTEGER NOT NULL",
            "finished_at": "INTEGER",
        },
        "primary_key": "delivery_id",
        "unique": [],
        "indexes": {
            "webhook_deliveries_by_webhook": "webhook_id, created_at",
            "webhook_deliveries_due": "next_attempt_at WHERE status = 'PENDING'",
            "webhook_deliveries_finished": "finished_at WHERE status <> 'PENDING'",
        },
        "foreign_keys": ["webhook_id -> webhook_subscriptions(webhook_id) ON DELETE CASCADE"],
    },
    "webhook_subscriptions": {
        "columns": {
            "webhook_id": "TEXT NOT NULL",
            "tenant": "TEXT NOT NULL",
            "url": "TEXT NOT NULL",
            "events": "TEXT NOT NULL",
            "secret": "TEXT NOT NULL",
            "description": "TEXT NOT NULL",
            "created_at": "INTEGER NOT NULL",
        },
        "primary_key": "webhook_id",
        "unique": [],
        "indexes": {"webhook_subscriptions_tenant": "tenant, created_at"},
        "foreign_keys": [],
    },
}

POSTGRES_SCHEMA: Schema = {
    "api_keys": {
        "columns": {
            "key_id": "text NOT NULL",
            "tenant": "text NOT NULL",
            "scope": "text NOT NULL",
            "name": "text NOT NULL",
            "key_hash": "text NOT NULL",
            "created_at": "timestamptz NOT NULL",
            "revoked_at": "timestamptz",
        },
        "primary_key": "key_id",
        "unique": ["key_hash"],
        "indexes": {},
        "foreign_keys": [],
    },
    "attempts": {
        "columns": {
            "execution_id": "uuid NOT NULL",
            "attempt_number": "integer NOT NULL",
            "worker_id": "text NOT NULL",
            "fencing_token": "bigint NOT NULL",
            "status": "text NOT NULL",
            "started_at": "timestamptz NOT NULL",
            "finished_at": "timestamptz",
            "error": "jsonb",
        },
        "primary_key": "execution_id, attempt_number",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],  # a delete trigger instead (migration 0021)
    },
    "concurrency_holds": {
        "columns": {
            "tenant": "text NOT NULL",
            "definition_uri": "text NOT NULL",
            "concurrency_key": "text NOT NULL",
            "slot": "integer NOT NULL",
            "execution_id": "uuid NOT NULL",
        },
        "primary_key": "tenant, definition_uri, concurrency_key, slot",
        "unique": [],
        "indexes": {"concurrency_holds_execution": "execution_id"},
        "foreign_keys": [],
    },
    "cron_applies": {
        "columns": {
            "tenant": "text NOT NULL",
            "apply_key": "text NOT NULL",
            "request_hash": "text NOT NULL",
            "result": "jsonb",
            "started_at": "timestamptz NOT NULL",
        },
        "primary_key": "tenant, apply_key",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "cron_audit": {
        "columns": {
            "audit_id": "bigint NOT NULL",
            "tenant": "text NOT NULL",
            "cron_job_id": "uuid NOT NULL",
            "name": "text NOT NULL",
            "action": "text NOT NULL",
            "actor": "text NOT NULL",
            "at": "timestamptz NOT NULL",
            "before": "jsonb",
            "after": "jsonb",
        },
        "primary_key": "audit_id",
        "unique": [],
        "indexes": {"cron_audit_job": "tenant, cron_job_id, audit_id"},
        "foreign_keys": [],
    },
    "cron_jobs": {
        "columns": {
            "cron_job_id": "uuid NOT NULL",
            "tenant": "text NOT NULL",
            "name": "text NOT NULL",
            "definition_uri": "text",
            "definition_version": "integer",
            "inputs": "jsonb NOT NULL",
            "expression": "text NOT NULL",
            "timezone": "text NOT NULL",
            "dst_policy": "jsonb NOT NULL",
            "status": "text NOT NULL",
            "misfire_policy": "text NOT NULL",
            "max_catch_up": "integer NOT NULL",
            "overlap_policy": "text NOT NULL",
            "jitter_seconds": "integer NOT NULL",
            "start_at": "timestamptz",
            "end_at": "timestamptz",
            "next_run_at": "timestamptz",
            "last_occurrence": "timestamptz",
            "last_execution_id": "uuid",
            "claimed_by": "text",
            "claim_expires_at": "timestamptz",
            "version": "integer NOT NULL",
            "created_at": "timestamptz NOT NULL",
            "updated_at": "timestamptz NOT NULL",
            "paused_at": "timestamptz",
            "workflow_name": "text",
            "workflow_version": "integer",
            "last_workflow_run_id": "uuid",
            "label": "text",
        },
        "primary_key": "cron_job_id",
        "unique": ["tenant, name"],
        "indexes": {
            "cron_jobs_due": "next_run_at WHERE status = 'ACTIVE'",
            "cron_jobs_label": "tenant, label, name",
        },
        "foreign_keys": [],
    },
    "cron_occurrences": {
        "columns": {
            "record_id": "bigint NOT NULL",
            "cron_job_id": "uuid NOT NULL",
            "occurrence": "timestamptz NOT NULL",
            "outcome": "text NOT NULL",
            "execution_id": "uuid",
            "execute_at": "timestamptz",
            "reason": "text",
            "recorded_at": "timestamptz NOT NULL",
            "workflow_run_id": "uuid",
        },
        "primary_key": "record_id",
        "unique": ["cron_job_id, occurrence, outcome"],
        "indexes": {},
        "foreign_keys": ["cron_job_id -> cron_jobs(cron_job_id) ON DELETE CASCADE"],
    },
    "dashboard_sessions": {
        "columns": {
            "session_hash": "text NOT NULL",
            "key_id": "text",
            "created_at": "timestamptz NOT NULL",
            "expires_at": "timestamptz NOT NULL",
        },
        "primary_key": "session_hash",
        "unique": [],
        "indexes": {"dashboard_sessions_expires": "expires_at"},
        "foreign_keys": ["key_id -> api_keys(key_id) ON DELETE CASCADE"],
    },
    "definitions": {
        "columns": {
            "name": "text NOT NULL",
            "version": "integer NOT NULL",
            "document": "jsonb NOT NULL",
            "content_hash": "text NOT NULL",
            "created_at": "timestamptz NOT NULL",
            "owner": "text NOT NULL",
        },
        "primary_key": "owner, name, version",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "execution_events": {
        "columns": {
            "event_id": "bigint NOT NULL",
            "execution_id": "uuid NOT NULL",
            "kind": "text NOT NULL",
            "at": "timestamptz NOT NULL",
            "detail": "jsonb NOT NULL",
        },
        "primary_key": "event_id",
        "unique": [],
        "indexes": {"execution_events_execution": "execution_id, event_id"},
        "foreign_keys": ["execution_id -> executions(execution_id) ON DELETE CASCADE"],
    },
    "execution_outputs": {
        "columns": {
            "execution_id": "uuid NOT NULL",
            "output": "jsonb NOT NULL",
            "size_bytes": "integer NOT NULL",
            "created_at": "timestamptz NOT NULL",
        },
        "primary_key": "execution_id",
        "unique": [],
        "indexes": {},
        "foreign_keys": ["execution_id -> executions(execution_id) ON DELETE CASCADE"],
    },
    "executions": {
        "columns": {
            "execution_id": "uuid NOT NULL",
            "tenant": "text NOT NULL",
            "definition_uri": "text NOT NULL",
            "definition_version": "integer NOT NULL",
            "input_snapshot": "jsonb NOT NULL",
            "execute_at": "timestamptz NOT NULL",
            "bucket_start": "timestamptz NOT NULL",
            "shard_id": "smallint NOT NULL",
            "idempotency_key": "text",
            "request_fingerprint": "text",
            "status": "text NOT NULL",
            "priority": "integer NOT NULL",
            "attempt_count": "integer NOT NULL",
            "max_attempts": "integer NOT NULL",
            "next_attempt_at": "timestamptz",
            "ready_at": "timestamptz",
            "lease_owner": "text",
            "lease_expires_at": "timestamptz",
            "fencing_token": "bigint",
            "output": "jsonb",
            "output_reference": "text",
            "error": "jsonb",
            "created_at": "timestamptz NOT NULL",
            "updated_at": "timestamptz NOT NULL",
            "started_at": "timestamptz",
            "finished_at": "timestamptz",
            "cancel_requested_at": "timestamptz",
            "progress": "jsonb",
            "checkpoint": "jsonb",
            "trace_context": "jsonb",
            "start_by": "timestamptz",
            "deadline": "timestamptz",
            "concurrency_key": "text",
            "concurrency_limit": "integer",
            "concurrency_order": "text",
        },
        "primary_key": "execution_id",
        "unique": ["tenant, idempotency_key"],
        "indexes": {
            "executions_concurrency_queue": "tenant, definition_uri, concurrency_key, execute_at,"
            " execution_id WHERE concurrency_limit IS NOT NULL"
            " AND status IN ('SCHEDULED', 'READY', 'RUNNING', 'RETRY_WAIT')",
            "executions_due": "shard_id, bucket_start, execute_at WHERE status = 'SCHEDULED'",
            "executions_ready_tenant": "tenant, priority DESC, ready_at WHERE status = 'READY'",
            "executions_running_lease": "lease_expires_at WHERE status = 'RUNNING'",
            "executions_retry_due": "next_attempt_at WHERE status = 'RETRY_WAIT'",
            "executions_tenant_status": "tenant, status, execution_id",
            "executions_tenant_definition": "tenant, definition_uri, execution_id",
            "executions_finished": "finished_at"
            " WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED')",
            "executions_start_by": "start_by WHERE status IN ('SCHEDULED', 'READY')"
            " AND started_at IS NULL AND start_by IS NOT NULL",
            "executions_deadline": "deadline WHERE status IN ('SCHEDULED', 'READY')"
            " AND started_at IS NULL AND deadline IS NOT NULL",
        },
        "foreign_keys": [],
    },
    "shard_leases": {
        "columns": {
            "shard_id": "smallint NOT NULL",
            "owner": "text",
            "epoch": "bigint NOT NULL",
            "expires_at": "timestamptz",
            "watermark": "timestamptz",
            "updated_at": "timestamptz NOT NULL",
            "due_through": "timestamptz",
        },
        "primary_key": "shard_id",
        "unique": [],
        "indexes": {"shard_leases_open": "shard_id, due_through WHERE due_through IS NOT NULL"},
        "foreign_keys": [],
    },
    "shard_owners": {
        "columns": {
            "owner": "text NOT NULL",
            "expires_at": "timestamptz NOT NULL",
            "updated_at": "timestamptz NOT NULL",
        },
        "primary_key": "owner",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "tickwheel_migrations": {
        "columns": {
            "version": "integer NOT NULL",
            "name": "text NOT NULL",
            "checksum": "text NOT NULL",
            "applied_at": "timestamptz NOT NULL",
        },
        "primary_key": "version",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "workers": {
        "columns": {
            "worker_id": "text NOT NULL",
            "host": "text NOT NULL",
            "pid": "integer NOT NULL",
            "concurrency": "integer NOT NULL",
            "started_at": "timestamptz NOT NULL",
            "last_heartbeat_at": "timestamptz NOT NULL",
            "running": "integer NOT NULL",
            "stopped_at": "timestamptz",
        },
        "primary_key": "worker_id",
        "unique": [],
        "indexes": {"workers_last_heartbeat": "last_heartbeat_at"},
        "foreign_keys": [],
    },
    "workflow_definitions": {
        "columns": {
            "name": "text NOT NULL",
            "version": "integer NOT NULL",
            "document": "jsonb NOT NULL",
            "content_hash": "text NOT NULL",
            "created_at": "timestamptz NOT NULL",
            "owner": "text NOT NULL",
        },
        "primary_key": "owner, name, version",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "workflow_events": {
        "columns": {
            "event_id": "bigint NOT NULL",
            "execution_id": "uuid NOT NULL",
            "workflow_run_id": "uuid NOT NULL",
            "status": "text NOT NULL",
            "created_at": "timestamptz NOT NULL",
            "claimed_by": "text",
            "claim_expires_at": "timestamptz",
        },
        "primary_key": "event_id",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "workflow_runs": {
        "columns": {
            "workflow_run_id": "uuid NOT NULL",
            "tenant": "text NOT NULL",
            "workflow_name": "text NOT NULL",
            "workflow_version": "integer NOT NULL",
            "inputs": "jsonb NOT NULL",
            "status": "text NOT NULL",
            "idempotency_key": "text",
            "request_hash": "text NOT NULL",
            "retry_count": "integer NOT NULL",
            "created_at": "timestamptz NOT NULL",
            "updated_at": "timestamptz NOT NULL",
            "finished_at": "timestamptz",
        },
        "primary_key": "workflow_run_id",
        "unique": [],
        "indexes": {
            "workflow_runs_key": "tenant, idempotency_key WHERE idempotency_key IS NOT NULL",
            "workflow_runs_running": "updated_at WHERE status = 'RUNNING'",
        },
        "foreign_keys": [],
    },
    "workflow_task_runs": {
        "columns": {
            "workflow_run_id": "uuid NOT NULL",
            "task_name": "text NOT NULL",
            "status": "text NOT NULL",
            "execution_id": "uuid",
            "output": "jsonb",
            "error": "jsonb",
            "updated_at": "timestamptz NOT NULL",
            "position": "integer NOT NULL",
            "depends_on": "jsonb NOT NULL",
        },
        "primary_key": "workflow_run_id, task_name",
        "unique": [],
        "indexes": {"workflow_task_runs_pending": "updated_at WHERE status = 'PENDING'"},
        "foreign_keys": ["workflow_run_id -> workflow_runs(workflow_run_id) ON DELETE CASCADE"],
    },
    "rate_limits": {
        "columns": {
            "tenant": "text NOT NULL",
            "definition_uri": "text NOT NULL",
            "rate_limit": "integer NOT NULL",
            "period_seconds": "double precision NOT NULL",
            "burst": "integer NOT NULL",
            "definition_version": "integer",
            "tokens": "double precision NOT NULL",
            "refilled_at": "timestamptz NOT NULL",
            "updated_at": "timestamptz NOT NULL",
        },
        "primary_key": "tenant, definition_uri",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "tenant_weights": {
        "columns": {
            "tenant": "text NOT NULL",
            "weight": "integer NOT NULL",
            "updated_at": "timestamptz NOT NULL",
        },
        "primary_key": "tenant",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "pauses": {
        "columns": {
            "tenant": "text NOT NULL",
            "definition_uri": "text NOT NULL",
            "kind": "text NOT NULL",
            "reason": "text NOT NULL",
            "paused_at": "timestamptz NOT NULL",
            "probe_execution_id": "uuid",
        },
        "primary_key": "tenant, definition_uri, kind",
        "unique": [],
        "indexes": {},
        "foreign_keys": [],
    },
    "circuit_breakers": {
        "columns": {
            "tenant": "text NOT NULL",
            "definition_uri": "text NOT NULL",
            "state": "text NOT NULL",
            "consecutive_failures": "integer NOT NULL",
            "recent": "text NOT NULL",
            "cool_down_until": "timestamptz",
            "probe_execution_id": "uuid",
            "updated_at": "timestamptz NOT NULL",
        },
        "primary_key": "tenant, definition_uri",
        "unique": [],
        "indexes": {"circuit_breakers_tripped": "cool_down_until WHERE state <> 'closed'"},
        "foreign_keys": [],
    },
    "circuit_breaker_transitions": {
        "columns": {
            "transition_id": "bigint NOT NULL",
            "tenant": "text NOT NULL",
            "definition_uri": "text NOT NULL",
            "from_state": "text NOT NULL",
            "to_state": "text NOT NULL",
            "reason": "text NOT NULL",
            "at": "timestamptz NOT NULL",
        },
        "primary_key": "transition_id",
        "unique": [],
        "indexes": {
            "circuit_breaker_transitions_definition": "tenant, definition_uri, transition_id"
        },
        "foreign_keys": [],
    },
    "webhook_deliveries": {
        "columns": {
            "delivery_id": "uuid NOT NULL",
            "webhook_id": "uuid NOT NULL",
            "tenant": "text NOT NULL",
            "event": "text NOT NULL",
            "payload": "jsonb NOT NULL",
            "status": "text NOT NULL",
            "attempts": "integer NOT NULL",
            "next_attempt_at": "timestamptz",
            "lease_owner": "text",
            "lease_expires_at": "timestamptz",
            "response_code": "integer",
            "last_error": "text",
            "created_at": "timestamptz NOT NULL",
            "finished_at": "timestamptz",
        },
        "primary_key": "delivery_id",
        "unique": [],
        "indexes": {
            "webhook_deliveries_by_webhook": "webhook_id, created_at",
            "webhook_deliveries_due": "next_attempt_at WHERE status = 'PENDING'",
            "webhook_deliveries_finished": "finished_at WHERE status <> 'PENDING'",
        },
        "foreign_keys": ["webhook_id -> webhook_subscriptions(webhook_id) ON DELETE CASCADE"],
    },
    "webhook_subscriptions": {
        "columns": {
            "webhook_id": "uuid NOT NULL",
            "tenant": "text NOT NULL",
            "url": "text NOT NULL",
            "events": "text[] NOT NULL",
            "secret": "text NOT NULL",
            "description": "text NOT NULL",
            "created_at": "timestamptz NOT NULL",
        },
        "primary_key": "webhook_id",
        "unique": [],
        "indexes": {"webhook_subscriptions_tenant": "tenant, created_at"},
        "foreign_keys": [],
    },
}

SQLITE_ONLY_TABLES = {"counters"}  # fencing tokens: PostgreSQL uses a sequence instead
# What PostgreSQL's migration 0021 dropped and SQLite keeps: on PostgreSQL every status change
# writes an entry into every plain index of executions (no transition is a HOT update), and the
# listing reads executions_tenant_status there instead; the attempts' foreign key became a delete
# trigger there. SQLite's single writer pays neither the same way, and its listing still reads
# executions_tenant_list. Likewise 0023 dropped executions_ready: PostgreSQL's plain claims walk
# executions_ready_tenant from the one READY tenant; SQLite's claim still walks executions_ready.
SQLITE_ONLY_INDEXES = {"executions": {"executions_tenant_list", "executions_ready"}}
SQLITE_ONLY_FOREIGN_KEYS = {
    "attempts": {"execution_id -> executions(execution_id) ON DELETE CASCADE"},
}
# Which native PostgreSQL types each SQLite storage type stands for (instants are integer µs).
COMPATIBLE_TYPES = {
    "TEXT": {"text", "uuid", "jsonb", "text[]"},  # text[]: a JSON array on SQLite
    "INTEGER": {"integer", "smallint", "bigint", "timestamptz"},
    "REAL": {"double precision"},
}


# -- introspection --------------------------------------------------------------------------------


def _column(type_: str, not_null: bool) -> str:
    return f"{type_} NOT NULL" if not_null else type_


def _predicate(text: str) -> str:
    """``(status = 'READY'::text)`` and ``status = 'READY'`` both become ``status = 'READY'``;
    PostgreSQL's ``status = ANY (ARRAY['A', 'B'])`` becomes ``status IN ('A', 'B')``."""
    text = re.sub(r"::\w+", "", " ".join(text.split()))
    text = re.sub(r"= ANY \(ARRAY\[(.*?)\]\)", r"IN (\1)", text)
    # PostgreSQL writes ``(a) AND (b)``: each clause of a conjunction loses its parentheses too.
    return " AND ".join(_unwrapped(part) for part in _conjuncts(_unwrapped(text)))


def _wraps(text: str) -> bool:
    """Whether the first parenthesis of ``text`` closes at its very end."""
    depth = 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            return i == len(text) - 1
    return False


def _unwrapped(text: str) -> str:
    while text.startswith("(") and _wraps(text):
        text = text[1:-1].strip()
    return text


def _conjuncts(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and text.startswith(" AND ", i):
            parts.append(text[start:i])
            start = i + len(" AND ")
    return [*parts, text[start:]]


def describe_sqlite(path: str) -> Schema:
    conn = sqlite3.connect(path)
    try:
        schema: Schema = {}
        tables = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " ORDER BY name"
        ).fetchall()
        for (table,) in tables:
            info = conn.execute(
                'SELECT name, type, "notnull", pk FROM pragma_table_info(?) ORDER BY cid',
                (table,),
            ).fetchall()
            pk = [name for name, _, _, _ in sorted((r for r in info if r[3]), key=lambda r: r[3])]
            # A single INTEGER PRIMARY KEY is the rowid: it can never hold NULL.
            rowid = pk[0] if len(pk) == 1 and _sqlite_type(info, pk[0]) == "INTEGER" else None
            columns = {
                name: _column(type_.upper(), bool(not_null) or name == rowid)
                for name, type_, not_null, _ in info
            }
            unique: list[str] = []
            indexes: dict[str, str] = {}
            index_rows = conn.execute(
                "SELECT name, origin, partial FROM pragma_index_list(?)", (table,)
            ).fetchall()
            for index, origin, partial in index_rows:
                keys = conn.execute(
                    'SELECT name, "desc" FROM pragma_index_xinfo(?) WHERE key = 1 ORDER BY seqno',
                    (index,),
                ).fetchall()
                cols = ", ".join(name + (" DESC" if desc else "") for name, desc in keys)
                if origin == "u":
                    unique.append(cols)
                elif origin == "c":
                    if partial:
                        (sql,) = conn.execute(
                            "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?",
                            (index,),
                        ).fetchone()
                        cols += " WHERE " + _predicate(re.split(r"\bWHERE\b", sql, flags=re.I)[1])
                    indexes[index] = cols
            fk_rows = conn.execute(
                'SELECT id, "table", "from", "to", on_delete FROM pragma_foreign_key_list(?)'
                " ORDER BY id, seq",
                (table,),
            ).fetchall()
            foreign_keys = [
                f"{src} -> {target}({dst}) ON DELETE {on_delete}"
                for _, target, src, dst, on_delete in fk_rows
            ]
            schema[table] = {
                "columns": columns,
                "primary_key": ", ".join(pk),
                "unique": sorted(unique),
                "indexes": indexes,
                "foreign_keys": sorted(foreign_keys),
            }
        return schema
    finally:
        conn.close()


def _sqlite_type(info: list[Any], column: str) -> str:
    return str(next(r[1] for r in info if r[0] == column)).upper()


_PG_ON_DELETE = {
    "a": "NO ACTION",
    "r": "RESTRICT",
    "c": "CASCADE",
    "n": "SET NULL",
    "d": "SET DEFAULT",
}

_PG_COLUMNS = """
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY c.relname, a.attnum
"""

# Indexes that do not back a constraint (those are listed as primary key or unique instead).
_PG_INDEXES = """
SELECT t.relname, ic.relname,
       array(SELECT a.attname || CASE WHEN i.indoption[k.ord - 1] & 1 = 1 THEN ' DESC' ELSE '' END
             FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             ORDER BY k.ord),
       pg_get_expr(i.indpred, i.indrelid)
FROM pg_index i
JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_class t ON t.oid = i.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = 'public'
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
ORDER BY 1, 2
"""

_PG_CONSTRAINTS = """
SELECT t.relname, c.contype,
       array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord)
             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
             ORDER BY k.ord),
       f.relname,
       array(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY AS k(attnum, ord)
             JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum
             ORDER BY k.ord),
       c.confdeltype
FROM pg_constraint c
JOIN pg_class t ON t.oid = c.conrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
LEFT JOIN pg_class f ON f.oid = c.confrelid
WHERE n.nspname = 'public' AND c.contype IN ('p', 'u', 'f')
"""


def describe_postgres(url: str) -> Schema:
    schema: Schema = {}
    with psycopg.connect(url) as conn:
        for table, column, type_, not_null in conn.execute(_PG_COLUMNS):
            entry = schema.setdefault(
                table,
                {"columns": {}, "primary_key": "", "unique": [], "indexes": {}, "foreign_keys": []},
            )
            type_ = "timestamptz" if type_ == "timestamp with time zone" else type_
            entry["columns"][column] = _column(type_, not_null)
        for table, index, cols, predicate in conn.execute(_PG_INDEXES):
            text = ", ".join(cols)
            if predicate is not None:
                text += " WHERE " + _predicate(predicate)
            schema[table]["indexes"][index] = text
        for table, kind, cols, target, target_cols, on_delete in conn.execute(_PG_CONSTRAINTS):
            entry = schema[table]
            if kind == "p":
                entry["primary_key"] = ", ".join(cols)
            elif kind == "u":
                entry["unique"].append(", ".join(cols))
            else:
                entry["foreign_keys"].append(
                    f"{', '.join(cols)} -> {target}({', '.join(target_cols)})"
                    f" ON DELETE {_PG_ON_DELETE[on_delete]}"
                )
        for entry in schema.values():
            entry["unique"].sort()
            entry["foreign_keys"].sort()
    return schema


# -- empty databases ------------------------------------------------------------------------------


@dataclass
class EmptyDatabase:
    """A database no migration has touched yet, and the store opened on it."""

    backend: str
    store: Store
    location: str  # the SQLite file, or the PostgreSQL URL

    def describe(self) -> Schema:
        if self.backend == "sqlite":
            return describe_sqlite(self.location)
        return describe_postgres(self.location)


@asynccontextmanager
async def empty_sqlite(directory: Path) -> AsyncIterator[EmptyDatabase]:
    path = str(directory / "empty.db")
    store = await open_store(f"sqlite:///{path}")
    try:
        yield EmptyDatabase("sqlite", store, path)
    finally:
        await store.close()


@asynccontextmanager
async def empty_postgres(server_url: str) -> AsyncIterator[EmptyDatabase]:
    """A brand-new database on the test server (not the session's shared, already migrated one)."""
    name = f"tickwheel_schema_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = server_url.rsplit("/", 1)[0] + "/" + name
    try:
        store = await open_store(url, pool_size=2)
        try:
            yield EmptyDatabase("postgres", store, url)
        finally:
            await store.close()
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def empty(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[EmptyDatabase]:
    if request.param == "sqlite":
        async with empty_sqlite(tmp_path) as db:
            yield db
    else:
        async with empty_postgres(request.getfixturevalue("pg_url")) as db:
            yield db


def _expected(backend: str) -> Schema:
    return SQLITE_SCHEMA if backend == "sqlite" else POSTGRES_SCHEMA


def _labels(backend: str) -> list[str]:
    package = "sqlite" if backend == "sqlite" else "postgres"
    return [m.label for m in load_migrations(f"tickwheel.store.{package}.migrations")]


# -- migrations equal the schema ------------------------------------------------------------------


async def test_migrations_on_an_empty_database_give_the_expected_schema(
    empty: EmptyDatabase,
) -> None:
    everything = _labels(empty.backend)
    assert await empty.store.migrations_pending() == everything
    assert await empty.store.migrate() == everything
    actual = empty.describe()
    expected = _expected(empty.backend)
    assert sorted(actual) == sorted(expected)
    for table in expected:
        assert actual[table] == expected[table], table


async def test_migrating_twice_is_a_no_op(empty: EmptyDatabase) -> None:
    await empty.store.migrate()
    before = empty.describe()
    assert await empty.store.migrate() == []
    assert await empty.store.migrations_pending() == []
    assert empty.describe() == before


async def test_the_test_store_is_migrated_and_has_the_expected_schema(
    store: Store, request: pytest.FixtureRequest
) -> None:
    """The ``store`` fixture every conformance test uses runs on this same schema."""
    assert await store.migrate() == []
    assert await store.migrations_pending() == []
    if isinstance(store, SqliteStore):
        assert describe_sqlite(store.path) == SQLITE_SCHEMA
    else:
        assert describe_postgres(request.getfixturevalue("pg_url")) == POSTGRES_SCHEMA


# -- both backends agree --------------------------------------------------------------------------


def test_the_snapshots_agree_with_each_other() -> None:
    """The expected schemas above differ only where the dialects must (types, SQLite-only
    tables); checked without a database so that a wrong snapshot shows up on its own."""
    _assert_same_shape(SQLITE_SCHEMA, POSTGRES_SCHEMA)


@pytest.mark.postgres
async def test_both_backends_migrate_to_the_same_shape(tmp_path: Path, pg_url: str) -> None:
    async with empty_sqlite(tmp_path) as lite, empty_postgres(pg_url) as pg:
        await lite.store.migrate()
        await pg.store.migrate()
        _assert_same_shape(lite.describe(), pg.describe())


def _assert_same_shape(lite: Schema, pg: Schema) -> None:
    lite_tables = set(lite) - SQLITE_ONLY_TABLES
    assert lite_tables == set(pg)
    for table in sorted(lite_tables):
        a, b = lite[table], pg[table]
        assert list(a["columns"]) == list(b["columns"]), f"column names of {table}"
        for column, lite_text in a["columns"].items():
            pg_text = b["columns"][column]
            lite_type, pg_type = (
                lite_text.removesuffix(" NOT NULL"),
                pg_text.removesuffix(" NOT NULL"),
            )
            assert pg_type in COMPATIBLE_TYPES[lite_type], (
                f"{table}.{column}: {lite_type} vs {pg_type}"
            )
            assert lite_text.endswith(" NOT NULL") == pg_text.endswith(" NOT NULL"), (
                f"nullability of {table}.{column}: {lite_text} vs {pg_text}"
            )
        lite_indexes = {
            name: text
            for name, text in a["indexes"].items()
            if name not in SQLITE_ONLY_INDEXES.get(table, set())
        }
        assert lite_indexes == b["indexes"], f"indexes of {table}"
        assert a["primary_key"] == b["primary_key"], f"primary key of {table}"
        assert a["unique"] == b["unique"], f"unique constraints of {table}"
        lite_only = SQLITE_ONLY_FOREIGN_KEYS.get(table, set())
        lite_keys = [k for k in a["foreign_keys"] if k not in lite_only]
        assert lite_keys == b["foreign_keys"], f"foreign keys of {table}"


@pytest.mark.parametrize(
    ("table", "insert"),
    [
        (
            "executions",
            "INSERT INTO executions (execution_id, tenant, definition_uri, definition_version,"
            " input_snapshot, execute_at, bucket_start, shard_id, status, max_attempts,"
            " created_at, updated_at)"
            " VALUES (NULL, 'acme', 'registry://jobs/x', 1, '{}', 0, 0, 0, 'READY', 1, 0, 0)",
        ),
        (
            "api_keys",
            "INSERT INTO api_keys (key_id, tenant, scope, key_hash, created_at)"
            " VALUES (NULL, 'acme', 'read', 'h', 0)",
        ),
    ],
)
async def test_sqlite_refuses_a_row_without_a_primary_key(
    tmp_path: Path, table: str, insert: str
) -> None:
    """SQLite, unlike PostgreSQL, lets a TEXT PRIMARY KEY hold NULL unless it says NOT NULL."""
    async with empty_sqlite(tmp_path) as db:
        await db.store.migrate()
    conn = sqlite3.connect(db.location)
    try:
        with pytest.raises(sqlite3.IntegrityError, match=f"NOT NULL constraint failed: {table}"):
            conn.execute(insert)
    finally:
        conn.close()
