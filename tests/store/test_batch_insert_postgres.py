"""PostgreSQL's side of the batch insert (``execution_insert`` with its shared columns): its
wake-ups, the values the database refuses wherever they sit (shared by the batch or in one
row), and the read of the keys an insert skipped."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from tests.factories import new_execution
from tests.store.plan_helpers import explain_prepared, plan_nodes
from tests.store.test_batch_insert import _key, _stored
from tickwheel.store.postgres import store as pg_store
from tickwheel.store.postgres.rows import INSERT, insert_items, key_pairs, lock_order
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


async def _then(*steps: Any) -> AsyncIterator[list[Any]]:
    """A chunk per step: a list is yielded, an exception raised, an event waited for."""
    for step in steps:
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, asyncio.Event):
            await step.wait()
            continue
        yield step


def _sorted(*names: str) -> list[Any]:
    return sorted((new_execution(key=_key(n)) for n in names), key=lock_order)


@pytest.mark.parametrize("where", ["first", "middle", "last"])
async def test_a_chunk_the_database_refuses_stores_nothing_of_the_batch(
    pg: PostgresStore, where: str
) -> None:
    """The chunks are one transaction: a refused value in any of them, after the others were
    sent (and run), leaves none of their rows; the store then takes a batch as before."""
    items = _sorted(*"abcdef")
    chunks = [items[0:2], items[2:4], items[4:6]]
    at = {"first": 0, "middle": 1, "last": 2}[where]
    chunks[at] = [chunks[at][0], dataclasses.replace(chunks[at][1], priority=2**40)]
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        await pg.execution_insert_or_existing_chunks(_then(*chunks))
    assert await _stored(pg, [i for c in chunks for i in c]) == 0
    fresh = _sorted("g", "h", "i")
    assert await pg.execution_insert_or_existing_chunks(_then(fresh[:1], fresh[1:])) == [None] * 3
    assert await _stored(pg, fresh) == 3


async def test_a_failure_of_the_caller_between_chunks_stores_nothing(pg: PostgresStore) -> None:
    """The caller's exception while it makes a chunk (the first chunks already sent and run):
    the transaction rolls back, the exception is the caller's."""
    items = _sorted("a", "b", "c", "d")
    with pytest.raises(RuntimeError, match="making the next chunk"):
        await pg.execution_insert_or_existing_chunks(
            _then(items[:2], items[2:3], RuntimeError("making the next chunk"), items[3:])
        )
    assert await _stored(pg, items) == 0
    assert await pg.execution_insert_or_existing_chunks(_then(items)) == [None] * 4


async def _until_a_chunk_has_run(pg: PostgresStore) -> None:
    """Waits until another session of this database holds the lock an insert into
    ``executions`` takes: a chunk sent has reached the server and run."""
    for _ in range(250):
        await asyncio.sleep(0.02)
        async with pg.pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT count(*) AS n FROM pg_locks JOIN pg_stat_activity USING (pid)"
                " WHERE locktype = 'relation' AND relation = 'executions'::regclass"
                " AND mode = 'RowExclusiveLock' AND pid <> pg_backend_pid()"
                " AND datname = current_database()"
            )
            row = await cursor.fetchone()
        if row is not None and row["n"]:
            return
    raise AssertionError("the chunk sent never ran")


async def test_a_batch_cancelled_between_chunks_stores_nothing(pg: PostgresStore) -> None:
    """Cancelled while the next chunk is made (its first one sent and run): no COMMIT went out,
    nothing is stored, and the store's connections still work."""
    items = _sorted("a", "b", "c")
    never = asyncio.Event()
    task = asyncio.create_task(pg.execution_insert_or_existing_chunks(_then(items[:2], never)))
    await _until_a_chunk_has_run(pg)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _stored(pg, items) == 0
    assert await pg.execution_insert_or_existing_chunks(_then(items)) == [None] * 3
    assert await _stored(pg, items) == 3


async def test_chunks_out_of_lock_order_are_refused_before_they_are_sent(
    pg: PostgresStore,
) -> None:
    """Each chunk must follow the previous one in lock order (else two batches could each hold
    a key the other waits for): refused, nothing stored."""
    items = _sorted("a", "b", "c")
    with pytest.raises(ValueError, match="follow the previous chunk"):
        await pg.execution_insert_or_existing_chunks(_then(items[1:], items[:1]))
    assert await _stored(pg, items) == 0


async def test_the_chunks_statement_is_prepared_at_its_first_run_its_generic_plan_scans_no_table(
    pg_url: str,
) -> None:
    """Each chunk's statement runs prepared from the first one on (psycopg's threshold would
    parse and plan it anew for the first five), and the generic plan the session keeps reads
    no table itself: the insert's function (``tickwheel_execution_insert``) and the wake-ups'
    JSON are its only scans; a taken key is still skipped under it."""
    store = await PostgresStore.open(pg_url, max_size=1)
    await store.migrate()
    try:
        items = _sorted(*"abcd")
        chunks = [items[0:2], items[2:4]]
        assert await store.execution_insert_or_existing_chunks(_then(*chunks)) == [None] * 4
        async with store.pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT name, generic_plans + custom_plans AS runs FROM pg_prepared_statements"
                " WHERE strpos(statement, 'tickwheel_execution_insert(') > 0"
            )
            [prepared] = await cursor.fetchall()
            assert prepared["runs"] == 2  # psycopg alone prepares a statement at its fifth run
            await conn.execute("SET plan_cache_mode = force_generic_plan")
            taken = [*_sorted("e", "f"), dataclasses.replace(items[3], execution_id=uuid.uuid4())]
            params = insert_items(sorted(taken, key=lock_order))
            params["notify"] = "[]"
            plan = await explain_prepared(conn, prepared["name"], INSERT, params)
            await conn.execute("RESET plan_cache_mode")
        nodes = list(plan_nodes(plan["Plan"]))
        scans = {n["Node Type"] for n in nodes if "Scan" in n["Node Type"]}
        assert scans <= {"Function Scan", "CTE Scan"}
        assert not [n for n in nodes if n.get("Relation Name") or n.get("Index Name")]
        assert plan["Plan"]["Actual Rows"] == 2  # e and f; d's key was taken
    finally:
        await store.close()
