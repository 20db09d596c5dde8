"""Shared fixtures: one ``store`` fixture parametrised over SQLite and PostgreSQL, so every store
test is a conformance test of both backends.

PostgreSQL: ``TICKWHEEL_TEST_PG_URL`` (default: the local server, database ``postgres``) is the
maintenance connection; the suite makes its own throwaway database, migrated once, and empties
its tables between tests. Without a server the PostgreSQL tests skip with the reason — except
under ``CI=true``, where they fail, because CI must exercise PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from tickwheel.store.protocol import Store

PG_ADMIN_URL = os.environ.get(
    "TICKWHEEL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
IN_CI = os.environ.get("CI", "").lower() == "true"


def _pg_unavailable_reason() -> str | None:
    try:
        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"PostgreSQL not reachable at {PG_ADMIN_URL} ({exc.__class__.__name__})"


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh, migrated database for this test session, dropped at the end."""
    reason = _pg_unavailable_reason()
    if reason is not None:
        if IN_CI:
            pytest.fail(f"CI=true requires PostgreSQL: {reason}")
        pytest.skip(reason)
    name = f"tickwheel_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    try:
        yield url
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_PG_TABLES = (
    "workflow_events",
    "workflow_task_runs",
    "workflow_runs",
    "workflow_definitions",
    "workers",
    "shard_owners",
    "execution_events",
    "attempts",
    "executions",
    "definitions",
    "api_keys",
    "cron_occurrences",
    "cron_audit",
    "cron_jobs",
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    from tickwheel.store.factory import open_store

    if request.param == "sqlite":
        s = await open_store(f"sqlite:///{tmp_path / 'test.db'}")
    else:
        url = request.getfixturevalue("pg_url")
        s = await open_store(url)
    try:
        await s.migrate()
        if request.param == "postgres":
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"TRUNCATE {', '.join(_PG_TABLES)} CASCADE")
                # shard_leases holds one row per shard from its migration: reset, not emptied.
                conn.execute(
                    "UPDATE shard_leases SET owner = NULL, epoch = 0, expires_at = NULL,"
                    " watermark = NULL"
                )
        yield s
    finally:
        await s.close()
