"""Shared fixtures: one ``store`` fixture parametrised over SQLite and PostgreSQL, so every store
test is a conformance test of both backends.

PostgreSQL: ``TICKWHEEL_TEST_PG_URL`` (default: the local server, database ``postgres``) is the
maintenance connection; the suite makes its own throwaway database, migrated once, and empties
its tables between tests. Without a server the PostgreSQL tests skip with the reason — except
under ``CI=true``, where they fail, because CI must exercise PostgreSQL.

SQLite: each test gets its own file, a copy of one migrated once per session (migrating a new
file took some 50 ms, in each of the 300-odd tests of the ``store`` fixture).

Parallel runs (``make test`` runs pytest-xdist, ``-n 2 --dist loadfile``): each worker is a
session of its own, so it makes its own databases, named with its id (``gw0``...) besides a
random part, and its own SQLite template; the scheduler below keeps each test file on one worker
(its module-scoped servers are started once) and the real-process tests on one worker, in turn."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tickwheel.store.protocol import Store

# Shared fixtures of the tests of spans (provider, exporter).
pytest_plugins = ("tests.otel_fixtures",)

PG_ADMIN_URL = os.environ.get(
    "TICKWHEEL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
IN_CI = os.environ.get("CI", "").lower() == "true"
# The xdist worker running this session ("main" without xdist): part of every database name the
# suite makes, so that a database left behind says which worker made it.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")


HA_FIGURES = "ha_figures"
"""The user property the HA tests (tests/ha) record their failover figures under. The summary is
printed from here, the root conftest: under xdist only the controller prints, and it never loads
tests/ha/conftest.py."""


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    figures = [
        str(value)
        for outcome in ("passed", "failed")
        for report in terminalreporter.stats.get(outcome, [])
        for name, value in getattr(report, "user_properties", ())
        if name == HA_FIGURES
    ]
    if figures:
        terminalreporter.section("HA failover figures")
        for text in figures:
            terminalreporter.write_line(text)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, absent from a run without it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` with the real-process tests as one unit (``tests/xdist_schedule.py``);
    any other ``--dist`` is xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from tests.xdist_schedule import ProcessesTogether

    return ProcessesTogether(config, log)


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
    name = f"tickwheel_test_{WORKER}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    try:
        yield url
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_migrated_template(pg_url: str) -> Iterator[str]:
    """The name of a database migrated by ``tickwheel db upgrade`` (the real command) once per
    session and never connected to again: tests that need a brand-new migrated database of their
    own copy it (``CREATE DATABASE ... TEMPLATE``), which takes a fraction of a second where a
    CLI start and the migrations took seconds per test. Depends on ``pg_url`` for its
    skip-or-fail rule when PostgreSQL is unreachable."""
    name = f"tickwheel_template_{WORKER}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    tickwheel = Path(sys.executable).with_name("tickwheel")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
    try:
        upgrade = subprocess.run(
            [str(tickwheel), "db", "upgrade", "--database-url", url],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert upgrade.returncode == 0, f"db upgrade failed:\n{upgrade.stdout}\n{upgrade.stderr}"
        yield name
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_PG_TABLES = (
    "webhook_deliveries",
    "webhook_subscriptions",
    "workflow_events",
    "workflow_task_runs",
    "workflow_runs",
    "workflow_definitions",
    "workers",
    "shard_owners",
    "execution_events",
    "attempts",
    "concurrency_holds",
    "executions",
    "definitions",
    "dashboard_sessions",
    "api_keys",
    "cron_occurrences",
    "cron_audit",
    "cron_applies",
    "cron_jobs",
    "pauses",
    "circuit_breakers",
    "circuit_breaker_transitions",
    "rate_limits",
    "tenant_weights",
)


def empty_pg_tables(conn: psycopg.Connection[Any], extra: tuple[str, ...] = ()) -> None:
    """Every row of the store's tables gone, in one transaction; the shard leases reset.

    DELETE, not TRUNCATE: the tables hold a few rows between tests, and TRUNCATE, which makes
    new files for every table and index, took some 150 ms per test against a few ms here. The
    tables are listed children first, and whatever else hangs off them goes by its foreign key's
    ON DELETE CASCADE (an unlisted table without one fails the DELETE loudly). ``extra`` tables
    are emptied last.

    All of it is one query string (simple protocol: statements without parameters may share
    one), one round trip: a statement each took some 70 ms a test, over a thousand PostgreSQL
    tests, against some 10 ms."""
    deletes = "".join(f"DELETE FROM {t};" for t in (*_PG_TABLES, *extra))  # noqa: S608 - fixed names
    # shard_leases holds one row per shard from its migration: reset, not emptied.
    reset = (
        "UPDATE shard_leases SET owner = NULL, epoch = 0, expires_at = NULL, watermark = NULL,"
        " due_through = NULL"
        " WHERE owner IS NOT NULL OR epoch <> 0 OR expires_at IS NOT NULL"
        " OR watermark IS NOT NULL OR due_through IS NOT NULL"
    )
    with conn.transaction():
        conn.execute(deletes + reset)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once for the session; each test's ``store`` works on a copy."""
    from tickwheel.store.factory import open_store

    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"

    async def migrate() -> None:
        s = await open_store(f"sqlite:///{path}")
        try:
            await s.migrate()
        finally:
            await s.close()  # the last connection: SQLite folds the WAL into the file

    asyncio.run(migrate())
    assert not path.with_name(path.name + "-wal").exists()
    return path


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path
) -> AsyncIterator[Store]:
    from tickwheel.store.factory import open_store

    if request.param == "sqlite":
        path = tmp_path / "test.db"
        shutil.copyfile(sqlite_template, path)
        s = await open_store(f"sqlite:///{path}")
    else:
        url = request.getfixturevalue("pg_url")
        s = await open_store(url)
    try:
        await s.migrate()  # nothing left to apply: the same check the application makes
        if request.param == "postgres":
            with psycopg.connect(url, autocommit=True) as conn:
                empty_pg_tables(conn)
        yield s
    finally:
        await s.close()
