"""What a process's start asks of PostgreSQL before its first claim: a worker's claim
connections are made while it starts, not on the first claim's path, and the migration check
of an up-to-date database is one read that no migration lock holds up."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg_pool import PoolTimeout

from tickwheel.store.postgres.migrating import MIGRATION_LOCK
from tickwheel.store.postgres.store import PostgresStore

pytestmark = pytest.mark.postgres


async def test_a_process_with_a_worker_connects_its_claims_at_open(pg_url: str) -> None:
    store = await PostgresStore.open(pg_url, claims=True)
    try:
        hot = store._hot
        assert hot is not store.pool and hot.min_size == 1
        await hot.wait(timeout=10)  # made in the background: ready without any claim
        assert hot.get_stats()["pool_available"] == 1
    finally:
        await store.close()


async def test_a_process_without_a_worker_never_connects_them(pg_url: str) -> None:
    store = await PostgresStore.open(pg_url)
    try:
        await store.ping()
        assert store._hot.min_size == 0
        assert store._hot.get_stats().get("pool_size", 0) == 0
    finally:
        await store.close()


async def test_a_store_that_is_down_fails_at_open_whatever_it_runs() -> None:
    """The hot pool's connection is not waited for: the main pool's still decides."""
    url = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"
    for claims in (False, True):
        with pytest.raises(PoolTimeout):
            await PostgresStore.open(url, timeout=1.0, claims=claims)


async def test_the_check_of_an_up_to_date_database_takes_no_migration_lock(pg_url: str) -> None:
    """A start is not held up by whoever holds the lock (a 'db upgrade' of another version, a
    long migration elsewhere) when this version has nothing to apply."""
    store = await PostgresStore.open(pg_url)
    try:
        await store.migrate()  # up to date (the session's database is already)
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as holder:
            await holder.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
            try:
                assert await asyncio.wait_for(store.migrations_pending(), 10) == []
            finally:
                await holder.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
    finally:
        await store.close()
