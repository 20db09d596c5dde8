"""PostgreSQL's batch insert tries the batch without ``ON CONFLICT``'s arbitration first
(``tickwheel_execution_insert``, migration 0024) and falls back to it only when a key is taken:
a batch of new keys writes no speculative insertion, and whatever made a key taken (a committed
row, a competing insert still open, the same key twice in the batch, at any place in it) each
key ends up in exactly one row, with each item's outcome what the arbitration alone gave."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest

from tests.factories import new_execution
from tickwheel.domain.submission import NewExecution
from tickwheel.store.postgres.store import PostgresStore

pytestmark = pytest.mark.postgres


def _keys(name: str, count: int) -> list[str]:
    """Keys unique to one test run (the session's database is shared), in lock order."""
    run = uuid.uuid4().hex[:8]
    return [f"{name}-{run}-{n:03}" for n in range(count)]


async def _rows_per_key(pg: PostgresStore, keys: list[str]) -> dict[str, int]:
    async with pg.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT idempotency_key, count(*) AS n FROM executions"
            " WHERE idempotency_key = ANY (%s) GROUP BY idempotency_key",
            (keys,),
        )
        return {r["idempotency_key"]: r["n"] for r in await cursor.fetchall()}


async def test_a_batch_of_new_keys_writes_no_speculative_insertion(
    pg: PostgresStore, pg_url: str
) -> None:
    """ON CONFLICT writes a confirm record per row it inserts (its speculative insertion): read
    from the WAL the batch wrote, there is none for a batch of new keys, and there are some
    again for a batch with a taken key (the fallback's arbitration)."""
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as wal:
        try:
            await wal.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        except psycopg.Error as exc:  # pragma: no cover - a server without the contrib module
            pytest.skip(f"pg_walinspect is not available on this server: {exc}")

        path = await (await wal.execute("SELECT pg_relation_filepath('executions')")).fetchone()
        if path is None or path[0] is None:  # pragma: no cover - a partitioned layout
            pytest.skip("executions is partitioned here: its rows are in the partitions")
        heap = "/".join(path[0].split("/")[-2:])  # the database's oid and the heap's file

        async def confirms_written_by(items: list[NewExecution]) -> int:
            start = await (await wal.execute("SELECT pg_current_wal_insert_lsn()")).fetchone()
            await pg.execution_insert_many(items)
            # pg_walinspect reads only flushed WAL, and the insert position may be past it by
            # other sessions' records; the batch's own records precede its commit, which was
            # flushed before the insert returned.
            end = await (await wal.execute("SELECT pg_current_wal_flush_lsn()")).fetchone()
            assert start is not None and end is not None
            # Only this database's executions heap: other sessions of the server (other
            # tests, in parallel) write confirm records of their own meanwhile.
            cursor = await wal.execute(
                "SELECT count(*) FROM pg_get_wal_records_info(%s, %s)"
                " WHERE resource_manager = 'Heap' AND record_type = 'HEAP_CONFIRM'"
                " AND block_ref LIKE %s",
                (start[0], end[0], f"% rel %/{heap} fork %"),
            )
            row = await cursor.fetchone()
            assert row is not None
            return int(row[0])

        new = [new_execution(key=k) for k in _keys("fresh", 50)]
        assert await confirms_written_by(new) == 0
        again = [new_execution(key=k) for k in _keys("again", 49)] + [
            new_execution(key=new[7].idempotency_key)
        ]
        assert await confirms_written_by(again) >= 49
        assert await _rows_per_key(pg, [i.idempotency_key or "" for i in new + again]) == {
            i.idempotency_key: 1 for i in new + again
        }


@pytest.mark.parametrize("place", [0, 5, 9], ids=["first", "middle", "last"])
async def test_a_taken_key_anywhere_leaves_one_row_per_key_and_each_items_outcome(
    pg: PostgresStore, place: int
) -> None:
    keys = _keys("taken", 10)
    [holder] = await pg.execution_insert_many([new_execution(key=keys[place])])
    items = [new_execution(key=k) for k in keys]
    outcomes = await pg.execution_insert_many(items)
    assert [o.created for o in outcomes] == [n != place for n in range(10)]
    assert outcomes[place].execution.execution_id == holder.execution.execution_id
    assert await _rows_per_key(pg, keys) == dict.fromkeys(keys, 1)
    # What the first try wrote before it met the taken key is gone with it: only the rows of
    # the outcomes exist.
    for item, outcome in zip(items, outcomes, strict=True):
        stored = await pg.execution_get(item.tenant, item.execution_id)
        assert (stored is not None) == outcome.created


async def test_the_same_key_twice_in_a_batch_inserts_the_first(pg: PostgresStore) -> None:
    keys = _keys("twice", 4)
    items = [new_execution(key=k) for k in keys]
    items.insert(2, new_execution(key=keys[1], inputs={"name": "Grace"}))
    outcomes = await pg.execution_insert_many(items)
    assert [o.created for o in outcomes] == [True, True, False, True, True]
    assert outcomes[2].execution.execution_id == items[1].execution_id
    assert await _rows_per_key(pg, keys) == dict.fromkeys(keys, 1)


@pytest.mark.parametrize("competitor_commits", [True, False], ids=["commits", "rolls-back"])
async def test_a_competing_open_insert_of_a_key_is_waited_for(
    pg: PostgresStore, pg_url: str, competitor_commits: bool
) -> None:
    """The first try waits for the competitor's uncommitted row like the arbitration does; if
    the competitor commits, the key is skipped (the fallback), else it is this batch's."""
    keys = _keys("open", 6)
    competing = new_execution(key=keys[3])
    async with await psycopg.AsyncConnection.connect(pg_url) as other:
        async with other.transaction(force_rollback=not competitor_commits):
            await pg.execution_insert_on([competing]).run_async(other)
            batch = asyncio.create_task(
                pg.execution_insert_many([new_execution(key=k) for k in keys])
            )
            await _until_waiting_on_a_lock(pg_url, batch)
        outcomes = await batch
    assert [o.created for o in outcomes] == [
        n != 3 or not competitor_commits for n in range(len(keys))
    ]
    if competitor_commits:
        assert outcomes[3].execution.execution_id == competing.execution_id
    assert await _rows_per_key(pg, keys) == dict.fromkeys(keys, 1)


async def _until_waiting_on_a_lock(pg_url: str, batch: asyncio.Task[object]) -> None:
    """Until some session of this database waits on a lock (the batch, behind the competitor's
    key): the batch must have reached the key while the competitor's row is still open."""
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as watcher:
        for _ in range(2_000):
            assert not batch.done(), "the batch did not wait for the competitor's open row"
            cursor = await watcher.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            row = await cursor.fetchone()
            if row is not None and row[0] > 0:
                return
            await asyncio.sleep(0.005)
    raise AssertionError("the batch never waited on the competitor's lock")


@pytest.mark.parametrize("own_key_taken", [False, True], ids=["first-try", "fallback"])
async def test_another_tenants_key_takes_nothing_from_this_tenant(
    pg: PostgresStore, own_key_taken: bool
) -> None:
    """Keys are unique per tenant: a batch whose keys another tenant already holds inserts every
    row of its own, in the first try and in the fallback (when one key of its own is taken),
    and never answers with the other tenant's execution."""
    keys = _keys("tenants", 5)
    theirs = await pg.execution_insert_many([new_execution("globex", key=k) for k in keys])
    mine = [new_execution("acme", key=k) for k in keys]
    if own_key_taken:
        [held] = await pg.execution_insert_many([new_execution("acme", key=keys[2])])
    outcomes = await pg.execution_insert_many(mine)
    assert [o.created for o in outcomes] == [not (own_key_taken and n == 2) for n in range(5)]
    assert all(o.execution.tenant == "acme" for o in outcomes)
    if own_key_taken:
        assert outcomes[2].execution.execution_id == held.execution.execution_id
    assert {o.execution.execution_id for o in outcomes}.isdisjoint(
        o.execution.execution_id for o in theirs
    )
    assert await _rows_per_key(pg, keys) == dict.fromkeys(keys, 2)
