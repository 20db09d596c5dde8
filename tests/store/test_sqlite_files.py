"""The SQLite file itself: private to its owner, and a lock held too long is a 503, not a 500."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.factories import definition, stored
from tickwheel.domain.errors import Unavailable
from tickwheel.store.sqlite.store import SqliteStore


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("permissive_umask")
async def test_a_new_database_and_its_wal_and_shm_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "tickwheel.db"
    store = await SqliteStore.open(str(path))
    try:
        await store.migrate()
        await store.definition_insert(stored(definition()))
        files = [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]
        assert all(f.exists() for f in files), sorted(p.name for p in path.parent.iterdir())
        assert {f.name: oct(mode(f)) for f in files} == {f.name: "0o600" for f in files}
    finally:
        await store.close()


async def test_an_existing_database_keeps_the_mode_its_operator_gave_it(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    path.touch()
    path.chmod(0o640)
    store = await SqliteStore.open(str(path))
    try:
        await store.migrate()
    finally:
        await store.close()
    assert mode(path) == 0o640


async def test_a_write_locked_out_beyond_the_busy_timeout_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    store = await SqliteStore.open(str(path))
    other = sqlite3.connect(path, isolation_level=None)
    try:
        await store.migrate()
        await store.ping()
        await store._conn.execute("PRAGMA busy_timeout = 50")  # not 10 s in a test
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        with pytest.raises(Unavailable, match="busy") as caught:
            await store.definition_insert(stored(definition()))
        assert caught.value.retry_after >= 1
        other.execute("ROLLBACK")
        assert await store.definition_insert(stored(definition()))
    finally:
        other.close()
        await store.close()
