"""A database URL per backend for the clients of ``tickwheel.connect``: a copy of the migrated
SQLite file, or the session's PostgreSQL database with its tables emptied."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.conftest import empty_pg_tables
from tests.factories import definition_doc
from tickwheel.store.factory import open_store


@dataclass(frozen=True)
class Database:
    url: str
    kind: str
    path: Path | None = None
    """The SQLite file (``sqlite3.connect(path)`` opens the caller's own connection)."""


GREET_JSON = json.dumps(definition_doc())


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(
    request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path
) -> Iterator[Database]:
    if request.param == "sqlite":
        path = tmp_path / "app.db"
        shutil.copyfile(sqlite_template, path)
        yield Database(f"sqlite:///{path}", "sqlite", path)
        return
    yield _postgres(request.getfixturevalue("pg_url"))


@pytest.fixture
def pg_database(pg_url: str) -> Database:
    """The PostgreSQL case alone, for what only PostgreSQL does (NOTIFY)."""
    return _postgres(pg_url)


def _postgres(url: str) -> Database:
    asyncio.run(_migrate(url))  # the session's database, migrated once (a no-op after)
    with psycopg.connect(url, autocommit=True) as conn:
        empty_pg_tables(conn)
    return Database(url, "postgres")


async def _migrate(url: str) -> None:
    store = await open_store(url)
    try:
        await store.migrate()
    finally:
        await store.close()
