"""Migration 0011 gives definitions and workflow definitions an owner: rows stored before it (one
registry every tenant's admin wrote to) become shared, on both backends, API keys survive the
scope change, and the new operator scope is accepted."""

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
from tests.factories import definition_doc
from tickwheel.store.migrate import load_migrations
from tickwheel.store.sqlite.migrating import split_statements

WORKFLOW = {"name": "nightly", "version": 1, "tasks": []}


def _old_rows(t0: object, pg: bool) -> list[tuple[str, tuple[object, ...]]]:
    """What a database before 0011 held: definitions, a workflow and an admin key."""
    rows: list[tuple[str, tuple[object, ...]]] = [
        (
            "INSERT INTO definitions (name, version, document, content_hash, created_at)"
            " VALUES (?, ?, ?, 'h', ?)",
            (name, version, json.dumps(definition_doc(name, version)), t0),
        )
        for name, version in (("victim", 1), ("victim", 2), ("report", 1))
    ]
    rows.append(
        (
            "INSERT INTO workflow_definitions (name, version, document, content_hash, created_at)"
            " VALUES ('nightly', 1, ?, 'h', ?)",
            (json.dumps(WORKFLOW), t0),
        )
    )
    rows.append(
        (
            "INSERT INTO api_keys (key_id, tenant, scope, name, key_hash, created_at)"
            " VALUES ('k1', 'acme', 'admin', 'old key', 'hash-1', ?)",
            (t0,),
        )
    )
    return [(sql.replace("?", "%s"), params) for sql, params in rows] if pg else rows


OWNERS = [("", "report", 1), ("", "victim", 1), ("", "victim", 2)]
NEW_KEY = (
    "INSERT INTO api_keys (key_id, tenant, scope, name, key_hash, created_at)"
    " VALUES ('k2', 'default', 'operator', 'new key', 'hash-2', ?)"
)


def test_sqlite_existing_definitions_become_shared(tmp_path: Path) -> None:
    migrations = {m.version: m for m in load_migrations("tickwheel.store.sqlite.migrations")}
    conn = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")

    def apply(versions: range) -> None:
        conn.execute("BEGIN IMMEDIATE")  # as SqliteStore.migrate: one transaction
        for version in versions:
            for statement in split_statements(migrations[version].sql):
                conn.execute(statement)
        conn.execute("COMMIT")

    apply(range(1, 11))
    for sql, params in _old_rows(0, pg=False):
        conn.execute(sql, params)
    apply(range(11, 12))
    owners = conn.execute("SELECT owner, name, version FROM definitions ORDER BY 2, 3").fetchall()
    workflows = conn.execute("SELECT owner, name FROM workflow_definitions").fetchall()
    keys = conn.execute("SELECT key_id, tenant, scope, key_hash FROM api_keys").fetchall()
    conn.execute(NEW_KEY, (0,))
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(NEW_KEY.replace("'k2'", "'k3'").replace("'operator'", "'root'"), (0,))
    conn.close()
    assert owners == OWNERS
    assert workflows == [("", "nightly")]
    assert keys == [("k1", "acme", "admin", "hash-1")]


@pytest.fixture
def pg_empty(pg_url: str) -> Iterator[str]:
    """An empty database of its own (``pg_url`` only for its skip-or-fail rule)."""
    name = f"tickwheel_m11_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres
def test_postgres_existing_definitions_become_shared(pg_empty: str) -> None:
    migrations = {m.version: m for m in load_migrations("tickwheel.store.postgres.migrations")}
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    with psycopg.connect(pg_empty, autocommit=True) as conn:
        for version in range(1, 11):
            with conn.transaction():
                conn.execute(migrations[version].sql.encode())
        with conn.transaction():
            for sql, params in _old_rows(t0, pg=True):
                conn.execute(sql.encode(), params)
            conn.execute(migrations[11].sql.encode())
        owners = conn.execute(
            "SELECT owner, name, version FROM definitions ORDER BY 2, 3"
        ).fetchall()
        workflows = conn.execute("SELECT owner, name FROM workflow_definitions").fetchall()
        keys = conn.execute("SELECT key_id, tenant, scope, key_hash FROM api_keys").fetchall()
        conn.execute(NEW_KEY.replace("?", "%s").encode(), (t0,))
        with pytest.raises(psycopg.errors.CheckViolation):
            bad = NEW_KEY.replace("'k2'", "'k3'").replace("'operator'", "'root'")
            conn.execute(bad.replace("?", "%s").encode(), (t0,))
    assert owners == OWNERS
    assert workflows == [("", "nightly")]
    assert keys == [("k1", "acme", "admin", "hash-1")]
