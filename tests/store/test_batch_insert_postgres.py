"""PostgreSQL's side of the batch insert (``execution_insert`` with its shared columns): its
wake-ups, the values the database refuses wherever they sit (shared by the batch or in one
row), and the read of the keys an insert skipped."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from tests.factories import new_execution
from tests.store.test_batch_insert import _key, _stored
from tickwheel.store.postgres import store as pg_store
from tickwheel.store.postgres.rows import key_pairs
from tickwheel.store.postgres.store import PostgresStore

pytestmark = pytest.mark.postgres


async def test_only_a_batch_that_inserts_wakes_anybody(pg_url: str) -> None:
    pg = await PostgresStore.open(pg_url, max_size=2)
    await pg.migrate()  # the session's database, whichever test comes first
    try:
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as listener:
            await listener.execute("LISTEN tickwheel_ready")
            await listener.execute("LISTEN tickwheel_due")
            items = [new_execution(key=_key("w")) for _ in range(4)]
            items.append(new_execution(key=_key("later"), execute_in=5))
            assert all(o.created for o in await pg.execution_insert_many(items))
            heard = [n.channel async for n in listener.notifies(timeout=0.5)]
            assert sorted(heard) == ["tickwheel_due", "tickwheel_ready"]
            again = [dataclasses.replace(i, execution_id=uuid.uuid4()) for i in items]
            assert not any(o.created for o in await pg.execution_insert_many(again))
            assert [n.channel async for n in listener.notifies(timeout=0.5)] == []
    finally:
        await pg.close()


@pytest.mark.parametrize(
    ("hostile", "expected"),
    [
        ({"idempotency_key": "nul\x00key"}, "UntranslatableCharacter"),
        ({"priority": 2**40}, "NumericValueOutOfRange"),
        ({"shard_id": 2**16 + 3}, "NumericValueOutOfRange"),
        ({"inputs": {"n": float("nan")}}, "InvalidTextRepresentation"),
    ],
    ids=["nul", "int4", "int2", "nan"],
)
@pytest.mark.parametrize("shared", [False, True], ids=["in-one-row", "shared"])
async def test_a_value_the_database_refuses_stores_nothing_of_the_batch(
    pg_url: str, hostile: dict[str, Any], expected: str, shared: bool
) -> None:
    """Past the checks at the edge (which refuse all four), the database still refuses them:
    in one row, or shared by the whole batch (cast once, in the statement's shared columns)."""
    pg = await PostgresStore.open(pg_url, max_size=2)
    await pg.migrate()  # the session's database, whichever test comes first
    try:
        items = [new_execution(key=_key("fine")) for _ in range(3)]
        items.insert(1, new_execution(key=_key("bad")))
        bad = range(len(items)) if shared else [1]
        items = [
            dataclasses.replace(item, **hostile) if n in bad else item
            for n, item in enumerate(items)
        ]
        with pytest.raises(psycopg.DataError) as refused:
            await pg.execution_insert_many(items)
        assert await _stored(pg, items) == 0
        assert type(refused.value).__name__ == expected
    finally:
        await pg.close()


@pytest.fixture
async def unanalyzed(pg_url: str) -> AsyncIterator[PostgresStore]:
    """A store on an emptied ``executions`` without statistics (as tests/store/
    test_plans_unanalyzed.py), with autovacuum off it until the end."""
    pg = await PostgresStore.open(pg_url, max_size=2)
    await pg.migrate()
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute("TRUNCATE executions CASCADE")
        await conn.execute("ALTER TABLE executions SET (autovacuum_enabled = false)")
        await conn.execute("DELETE FROM pg_statistic WHERE starelid = 'executions'::regclass")
    try:
        yield pg
    finally:
        await pg.close()
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            await conn.execute("ALTER TABLE executions RESET (autovacuum_enabled)")
            await conn.execute("ANALYZE executions")


async def test_the_read_of_taken_keys_probes_the_key_index_without_statistics(
    unanalyzed: PostgresStore,
) -> None:
    """The old IN list was planned as a hash join over a scan of every row (7 ms for 1,000
    keys over 20,000 rows): a batch that repeats its keys reads them back this way."""
    for n in range(4):
        await unanalyzed.execution_insert_many(
            [new_execution(key=f"plan-{n}-{i}") for i in range(1_000)]
        )
    keys = [new_execution(key=f"plan-new-{i}") for i in range(1_000)]
    keys.append(new_execution(key="plan-2-7"))
    async with unanalyzed.pool.connection() as conn:
        cursor = await conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + pg_store.Q["execution_get_by_key"],
            {"pairs": key_pairs(keys)},
        )
        row = await cursor.fetchone()
    assert row is not None
    plan = str(next(iter(row.values())))
    assert "Seq Scan" not in plan and "executions_idempotency_key" in plan
    [found] = await unanalyzed.execution_insert_many([new_execution(key="plan-2-7")])
    assert not found.created
