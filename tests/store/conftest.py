"""Fixtures of more than one file of tests/store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.store.plan_helpers import emptied_store
from tickwheel.store.postgres.store import PostgresStore


@pytest.fixture
async def unanalyzed(pg_url: str) -> AsyncIterator[PostgresStore]:
    """A PostgreSQL store on an emptied ``executions`` without statistics until the test ends
    (the plans of a new database, or of one whose statistics are gone)."""
    async with emptied_store(pg_url, statistics=False) as store:
        yield store


@pytest.fixture
async def pg(pg_url: str) -> AsyncIterator[PostgresStore]:
    """A PostgreSQL store on the session's database (migrated by whichever test comes first),
    with three connections: a test may hold one while the store's statements run."""
    store = await PostgresStore.open(pg_url, max_size=3)
    await store.migrate()
    try:
        yield store
    finally:
        await store.close()
