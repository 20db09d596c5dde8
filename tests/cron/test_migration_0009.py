"""Migration 0009 on SQLite rebuilds ``cron_jobs`` and ``cron_occurrences`` (SQLite cannot drop a
NOT NULL in place) inside the migration transaction, with foreign keys on: the rows already
there must come through unchanged, the history must not be cascaded away, and the new rule
(exactly one target) must hold afterwards."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tickwheel.store.migrate import load_migrations
from tickwheel.store.sqlite.migrating import split_statements

JOB = (
    "INSERT INTO cron_jobs (cron_job_id, tenant, name, definition_uri, definition_version,"
    " inputs, expression, timezone, dst_policy, status, misfire_policy, max_catch_up,"
    " overlap_policy, jitter_seconds, next_run_at, last_occurrence, last_execution_id,"
    " claimed_by, claim_expires_at, version, created_at, updated_at) VALUES ('j1', 'acme',"
    " 'nightly', 'registry://jobs/greet', 2, '{\"name\": \"Ada\"}', '0 2 * * *', 'UTC', '{}',"
    " 'ACTIVE', 'run_once', 10, 'forbid', 5, 300, 200, 'e1', 'svc-1', 400, 3, 100, 150)"
)
OCCURRENCE = (
    "INSERT INTO cron_occurrences (cron_job_id, occurrence, outcome, execution_id, execute_at,"
    " reason, recorded_at) VALUES ('j1', 200, 'SUBMITTED', 'e1', 205, 'late', 210)"
)


def _apply(conn: sqlite3.Connection, versions: range) -> None:
    migrations = {m.version: m for m in load_migrations("tickwheel.store.sqlite.migrations")}
    conn.execute("BEGIN IMMEDIATE")  # as SqliteStore.migrate: one transaction, FKs stay on
    for version in versions:
        for statement in split_statements(migrations[version].sql):
            conn.execute(statement)
    conn.execute("COMMIT")


def test_the_rebuild_keeps_every_row_and_adds_the_target_rule(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    _apply(conn, range(1, 9))
    conn.execute(JOB)
    conn.execute(OCCURRENCE)
    before_job = conn.execute("SELECT * FROM cron_jobs").fetchone()
    before_row = conn.execute("SELECT * FROM cron_occurrences").fetchone()

    _apply(conn, range(9, 10))

    conn.row_factory = sqlite3.Row
    job = dict(conn.execute("SELECT * FROM cron_jobs").fetchone())
    row = dict(conn.execute("SELECT * FROM cron_occurrences").fetchone())
    assert tuple(job.values())[: len(before_job)] == before_job
    assert (job["workflow_name"], job["workflow_version"], job["last_workflow_run_id"]) == (
        None,
        None,
        None,
    )
    assert tuple(row.values())[: len(before_row)] == before_row and row["workflow_run_id"] is None
    assert (
        conn.execute("SELECT count(*) FROM sqlite_master WHERE name LIKE '%0009'").fetchone()[0]
        == 0
    )
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'cron_jobs_due'").fetchone()
    # The history still belongs to its job: deleting the job takes it along.
    conn.execute(
        "INSERT INTO cron_occurrences (cron_job_id, occurrence, outcome, recorded_at)"
        " VALUES ('j1', 260, 'SKIPPED_OVERLAP', 270)"
    )
    assert (
        row["record_id"] < conn.execute("SELECT max(record_id) FROM cron_occurrences").fetchone()[0]
    )
    # Exactly one target.
    for definition, workflow in ((None, None), ("registry://jobs/greet", "greeting")):
        with pytest.raises(sqlite3.IntegrityError, match="cron_jobs_one_target"):
            conn.execute(
                JOB.replace(
                    "'j1', 'acme', 'nightly', 'registry://jobs/greet'", "'j2', 'acme', 'other', ?"
                )
                .replace("created_at, updated_at)", "created_at, updated_at, workflow_name)")
                .replace("100, 150)", "100, 150, ?)"),
                (definition, workflow),
            )
    conn.execute("DELETE FROM cron_jobs WHERE cron_job_id = 'j1'")
    assert conn.execute("SELECT count(*) FROM cron_occurrences").fetchone()[0] == 0
    conn.close()
