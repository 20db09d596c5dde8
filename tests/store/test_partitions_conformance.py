"""The store's conformance tests again, on a PostgreSQL database whose executions table was
converted to monthly partitions (docs/scaling.md): the partitioned layout must behave exactly
like the plain one for every store method — submissions and idempotency keys, claims and
fencing, retries, the reaper, cancels and replays, retention and shard leases.

The tests are the conformance suite's own functions, collected here a second time; this module's
``store`` fixture (which overrides the shared, parametrised one) hands them a partitioned store.
One database for the module, converted once and emptied before each test like the shared one."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from tests.conftest import empty_pg_tables
from tests.engine import test_pruner, test_services, test_shard_scheduler
from tests.factories import T0
from tests.store import (
    test_attempts,
    test_batch_insert,
    test_executions,
    test_retention,
    test_shard_leases,
)
from tickwheel.store.postgres.partitions import partitions_for
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.protocol import Store

pytestmark = pytest.mark.postgres

# Every test function of these modules, under its own name.
_SUITES = (
    test_executions,
    test_batch_insert,
    test_attempts,
    test_retention,
    test_shard_leases,
    test_pruner,
    test_services,
    test_shard_scheduler,
)
globals().update(
    {name: fn for suite in _SUITES for name, fn in vars(suite).items() if name.startswith("test_")}
)
# The fixtures those tests ask for besides ``store``.
globals().update(
    {
        name: value
        for suite in _SUITES
        for name, value in vars(suite).items()
        if hasattr(value, "_pytestfixturefunction") or hasattr(value, "_fixture_function_marker")
    }
)


async def _convert(url: str) -> None:
    store = await PostgresStore.open(url, max_size=2)
    try:
        await store.migrate()
        # The suites' ids are made around tests.factories.T0 (March 2026) or later (the id
        # generator never goes back): March's partition and this month's exist, and the rest
        # lands in the default partition, which must work the same. Few partitions: each is
        # truncated before every test.
        await partitions_for(store).enable(T0, ahead=0)
        await partitions_for(store).ensure(datetime.now(UTC), ahead=0)
    finally:
        await store.close()


@pytest.fixture(scope="module")
def partitioned_url(pg_url: str) -> Iterator[str]:
    name = f"tickwheel_partitioned_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = pg_url.rsplit("/", 1)[0] + "/" + name
    try:
        asyncio.run(_convert(url))
        yield url
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def store(partitioned_url: str) -> AsyncIterator[Store]:
    s = await PostgresStore.open(partitioned_url)
    try:
        with psycopg.connect(partitioned_url, autocommit=True) as conn:
            # The layout's delete trigger takes the executions' children and keys with them;
            # emptied by name as well, so nothing survives whatever a test did.
            empty_pg_tables(conn, extra=("execution_outputs", "execution_keys"))
            layout = conn.execute(
                "SELECT relkind FROM pg_class WHERE oid = 'executions'::regclass"
            ).fetchone()
        assert layout == ("p",)
        yield s
    finally:
        await s.close()


def test_the_suites_are_collected_here() -> None:
    collected: dict[str, Any] = globals()
    for suite in _SUITES:
        names = [n for n in vars(suite) if n.startswith("test_")]
        assert names and all(collected[n] is vars(suite)[n] for n in names)
