"""Several submit lanes (``store/postgres/submit_lanes.py``): single submissions in flight together
each run on a lane's kept connection, not the pool's path; no more than half the pool is kept; a
caller who finds no connection idle gets a kept one; and a lane whose submission ends while a
caller waits for a connection gives its connection back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from tests.factories import new_execution
from tests.store.lane_helpers import WAIT_S, lanes_of, open_store, opened_store, until
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.postgres.submit_lanes import MAX_LANES, lane_count

pytestmark = pytest.mark.postgres


def test_at_most_half_the_pool_is_kept() -> None:
    assert [lane_count(n) for n in (1, 2, 3, 4, 5, 8, 10, 50)] == [1, 1, 1, 2, 2, 4, 4, 4]
    assert MAX_LANES == 4


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PostgresStore]:
    async with opened_store(pg_url, 8) as s:
        yield s


def _no_pool_path(store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each statement that took the pool's path instead of a lane's."""
    taken: list[str] = []
    through_pool = store.pool.connection

    def counted(*args: Any, **kw: Any) -> Any:
        taken.append("pool")
        return through_pool(*args, **kw)

    monkeypatch.setattr(store.pool, "connection", counted)
    return taken


async def _locked_out(pg_url: str, store: PostgresStore, pids: set[int]) -> bool:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        rows = await (
            await conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid = ANY(%s)",
                [list(pids)],
            )
        ).fetchall()
    return len(rows) == len(pids)


async def test_concurrent_single_submissions_each_run_on_a_lane(
    store: PostgresStore, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lanes = lanes_of(store)
    assert len(lanes.lanes) == 4
    taken = _no_pool_path(store, monkeypatch)
    for round_ in range(3):
        items = [new_execution(key=f"r{round_}-{n}") for n in range(4)]
        outcomes = await asyncio.gather(*(store.execution_insert_many([i]) for i in items))
        assert [o.execution.execution_id for [o] in outcomes] == [i.execution_id for i in items]
        assert all(o.created for [o] in outcomes)
        # The wake-up they owe is sent on a lane once all ended (test_submit_wakeups.py): the
        # next four would find three lanes free meanwhile.
        await until(lambda: not lanes.paying, "the owed wake-up sent")
    assert taken == []  # one lane had served one at a time and the pool's path the other three
    pids = {lane._conn.pgconn.backend_pid for lane in lanes.lanes if lane._conn is not None}
    assert len(pids) == 4
    # A repeat on any lane is the stored execution, as on the pool's path.
    again = [new_execution(key=f"r0-{n}") for n in range(4)]
    repeats = await asyncio.gather(*(store.execution_insert_many([i]) for i in again))
    assert not any(o.created for [o] in repeats)
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        # Only this test's keys: the session's database holds what earlier tests left.
        keys = [f"r{r}-{n}" for r in range(3) for n in range(4)]
        row = await (
            await conn.execute(
                "SELECT count(*) FROM executions WHERE idempotency_key = ANY(%s)", [keys]
            )
        ).fetchone()
    assert row is not None and row[0] == 12


async def test_a_caller_finding_none_idle_gets_a_kept_connection(pg_url: str) -> None:
    """Four connections, two kept by lanes, two held: a read gets a lane's at once instead of
    waiting out the pool's timeout (here 2 s, ``Unavailable``)."""
    s = await open_store(pg_url, 4, timeout=2)
    try:
        lanes = lanes_of(s)
        await asyncio.gather(*(s.execution_insert_many([new_execution()]) for _ in range(2)))
        assert all(lane._conn is not None for lane in lanes.lanes)
        async with s.pool.connection() as one, s.pool.connection() as two:
            for held in (one, two):
                await held.execute("SELECT 1")
            assert await s.execution_get("acme", new_execution().execution_id) is None
            assert [lane._conn is not None for lane in lanes.lanes] == [True, False]
    finally:
        await s.close()


async def test_a_lane_gives_its_connection_back_when_its_submission_ends_and_a_caller_waits(
    pg_url: str,
) -> None:
    """Both lanes busy (their inserts wait for a table lock) and the pool's other two held: a
    third caller waits; each lane's connection goes back as its submission ends, so the caller
    gets one then, not when it times out (30 s here) or when some held connection is returned."""
    s = await open_store(pg_url, 4)
    try:
        lanes = lanes_of(s)
        await asyncio.gather(*(s.execution_insert_many([new_execution()]) for _ in range(2)))
        pids = {lane._conn.pgconn.backend_pid for lane in lanes.lanes if lane._conn is not None}
        assert len(pids) == 2
        async with await psycopg.AsyncConnection.connect(pg_url) as blocker:
            await blocker.execute("LOCK TABLE executions IN ACCESS EXCLUSIVE MODE")
            inserts = [
                asyncio.create_task(s.execution_insert_many([new_execution(key=f"w{n}")]))
                for n in range(2)
            ]
            await until(
                lambda: _locked_out(pg_url, s, pids), "the lanes' inserts wait for the lock"
            )
            async with s.pool.connection() as one, s.pool.connection() as two:
                for held in (one, two):
                    await held.execute("SELECT 1")

                async def read() -> None:
                    async with s.pool.connection() as conn:
                        await conn.execute("SELECT 1")

                reader = asyncio.create_task(read())
                await until(lambda: s.pool.waiting, "the reader waits for a connection")
                await blocker.rollback()
                for done in await asyncio.gather(*inserts):
                    assert done[0].created
                await asyncio.wait_for(reader, WAIT_S)
                assert sum(lane._conn is None for lane in lanes.lanes) >= 1
    finally:
        await s.close()
