"""What the submit path's insert gives back and whom it wakes: the execution it returns is the
row it stored (the PostgreSQL store builds it from the item instead of reading it back), and
on PostgreSQL the wake-ups travel inside the insert statement, for rows really inserted only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta, timezone

import psycopg
import pytest

from tests.factories import T0, new_execution
from tickwheel.domain.states import ExecutionStatus
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.protocol import Store

PLUS_TWO = timezone(timedelta(hours=2))


async def test_an_insert_returns_the_row_it_stored(store: Store) -> None:
    now = T0.astimezone(PLUS_TWO)  # an offset that the stored row does not keep
    items = [
        new_execution(key="due", now=now, inputs={"times": 3, "name": "Ada"}),
        new_execution(key="later", now=now, execute_in=90.5),
        new_execution(now=now, priority=7),  # no key
    ]
    outcomes = await store.execution_insert_many(items)
    assert [o.created for o in outcomes] == [True, True, True]
    assert [o.execution.execution_id for o in outcomes] == [i.execution_id for i in items]
    assert [o.execution.status for o in outcomes] == [
        ExecutionStatus.READY, ExecutionStatus.SCHEDULED, ExecutionStatus.READY,
    ]  # fmt: skip
    for outcome in outcomes:
        returned = outcome.execution
        assert returned == await store.execution_get("acme", returned.execution_id)
        for at in (returned.execute_at, returned.created_at, returned.bucket_start):
            assert at.utcoffset() == timedelta(0)
    [repeat] = await store.execution_insert_many([new_execution(key="due", now=now)])
    assert not repeat.created and repeat.execution == outcomes[0].execution


@pytest.fixture
async def pg(pg_url: str) -> AsyncIterator[PostgresStore]:
    store = await PostgresStore.open(pg_url, max_size=1)
    await store.migrate()
    try:
        yield store
    finally:
        await store.close()


async def _heard(listener: psycopg.AsyncConnection[tuple[object, ...]]) -> list[str]:
    return [n.channel async for n in listener.notifies(timeout=0.5)]


@pytest.mark.postgres
async def test_only_rows_really_inserted_wake_anybody(pg_url: str, pg: PostgresStore) -> None:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as listener:
        await listener.execute("LISTEN tickwheel_ready")
        await listener.execute("LISTEN tickwheel_due")
        key = f"wake-{T0.timestamp()}-{id(listener)}"
        [first] = await pg.execution_insert_many([new_execution(key=key)])
        assert first.created
        assert await _heard(listener) == ["tickwheel_ready"]
        # The same submission again: nothing inserted, nobody woken.
        [again] = await pg.execution_insert_many([new_execution(key=key)])
        assert not again.created
        assert await _heard(listener) == []
        # A batch of both kinds: each channel once.
        both = [new_execution(key=f"{key}-a"), new_execution(key=f"{key}-b", execute_in=5)]
        assert all(o.created for o in await pg.execution_insert_many(both))
        assert sorted(await _heard(listener)) == ["tickwheel_due", "tickwheel_ready"]
