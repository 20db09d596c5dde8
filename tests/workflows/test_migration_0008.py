"""Migration 0008 gives task runs of runs started before it their workflow's order and
dependencies, from the stored workflow document, on both backends: the sweep and the task list
then treat old runs like new ones."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from tests.conftest import PG_ADMIN_URL
from tickwheel.store.migrate import load_migrations
from tickwheel.store.sqlite.migrating import split_statements

RUN = "0190f000-0000-7000-8000-000000000001"
DOCUMENT = {
    "name": "nightly",
    "version": 1,
    "tasks": [
        {"name": "zeta", "definition": "registry://jobs/step", "dependsOn": []},
        {"name": "alpha", "definition": "registry://jobs/step", "dependsOn": ["zeta"]},
        {"name": "beta", "definition": "registry://jobs/step", "dependsOn": ["zeta", "alpha"]},
    ],
}
# Inserted in another order than the document's, as nothing guaranteed one before 0008.
INSERTED = ["beta", "zeta", "alpha"]
EXPECTED = [("zeta", 0, []), ("alpha", 1, ["zeta"]), ("beta", 2, ["zeta", "alpha"])]


def _old_rows(t0: object, pg: bool) -> list[tuple[str, tuple[object, ...]]]:
    """The rows a run started before 0008 left, with ``t0`` the dialect's value of an instant
    (and psycopg's placeholder for ``?`` on PostgreSQL)."""
    rows: list[tuple[str, tuple[object, ...]]] = [
        (
            "INSERT INTO workflow_definitions (name, version, document, content_hash, created_at)"
            " VALUES (?, 1, ?, 'h', ?)",
            ("nightly", json.dumps(DOCUMENT), t0),
        ),
        (
            "INSERT INTO workflow_runs (workflow_run_id, tenant, workflow_name, workflow_version,"
            " inputs, status, request_hash, created_at, updated_at)"
            " VALUES (?, 'acme', 'nightly', 1, '{}', 'RUNNING', 'h', ?, ?)",
            (RUN, t0, t0),
        ),
    ]
    for name in INSERTED:
        rows.append(
            (
                "INSERT INTO workflow_task_runs (workflow_run_id, task_name, status, updated_at)"
                " VALUES (?, ?, 'PENDING', ?)",
                (RUN, name, t0),
            )
        )
    return [(sql.replace("?", "%s"), params) for sql, params in rows] if pg else rows


def test_sqlite_backfills_order_and_dependencies(tmp_path: Path) -> None:
    migrations = {m.version: m for m in load_migrations("tickwheel.store.sqlite.migrations")}
    conn = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")

    def apply(versions: range) -> None:
        conn.execute("BEGIN IMMEDIATE")  # as SqliteStore.migrate: one transaction
        for version in versions:
            for statement in split_statements(migrations[version].sql):
                conn.execute(statement)
        conn.execute("COMMIT")

    apply(range(1, 8))
    for sql, params in _old_rows(0, pg=False):
        conn.execute(sql, params)
    apply(range(8, 9))
    rows = conn.execute(
        "SELECT task_name, position, depends_on FROM workflow_task_runs"
        " ORDER BY position, task_name"
    ).fetchall()
    conn.close()
    assert [(n, p, json.loads(d)) for n, p, d in rows] == EXPECTED


@pytest.fixture
def pg_empty(pg_url: str) -> Iterator[str]:
    """An empty database of its own (``pg_url`` only for its skip-or-fail rule)."""
    name = f"tickwheel_m8_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres
def test_postgres_backfills_order_and_dependencies(pg_empty: str) -> None:
    migrations = {m.version: m for m in load_migrations("tickwheel.store.postgres.migrations")}
    with psycopg.connect(pg_empty, autocommit=True) as conn:
        for version in range(1, 8):
            with conn.transaction():
                conn.execute(migrations[version].sql.encode())
        with conn.transaction():
            for sql, params in _old_rows(datetime(2026, 3, 1, tzinfo=UTC), pg=True):
                conn.execute(sql.encode(), params)
            conn.execute(migrations[8].sql.encode())
        rows = conn.execute(
            "SELECT task_name, position, depends_on FROM workflow_task_runs"
            " ORDER BY position, task_name"
        ).fetchall()
    assert [(n, p, d) for n, p, d in rows] == EXPECTED
