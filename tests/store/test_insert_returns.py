"""What the submit path's insert gives back and whom it wakes: the execution it returns is the
row it stored (the PostgreSQL store builds it from the item instead of reading it back), and
on PostgreSQL the wake-ups travel inside the insert statement, for rows really inserted only."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import timedelta, timezone

import psycopg
import pytest

from tests.factories import T0, definition, new_execution
from tickwheel.domain.ids import uuid7
from tickwheel.domain.models import ExecutionFilter
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import SubmitRequest, prepare_execution
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.protocol import Store

PLUS_TWO = timezone(timedelta(hours=2))
ANY = ExecutionFilter()


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


async def test_a_single_insert_stores_every_column_as_the_batch_does(store: Store) -> None:
    """One item goes as a parameter per column (PostgreSQL), a batch as JSON rows: each item
    with every optional column set, or an uncommon key, reads back as the row it returned, and
    on PostgreSQL a key it cannot store (NUL, a lone surrogate) is refused, nothing stored."""
    now = T0.astimezone(PLUS_TWO)
    limited = definition(concurrency={"key": "${{ inputs.name }}", "limit": 2, "order": "none"})
    trace = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    request = SubmitRequest(
        definition_uri="registry://jobs/greet",
        inputs={"name": "Zoë", "times": 3},
        execute_at=now + timedelta(minutes=3),
        priority=-7,
        idempotency_key="clé-1",
        start_by=now + timedelta(hours=1),
        deadline=now + timedelta(hours=2),
    )
    full = prepare_execution(request, limited, "acme", now, trace)
    for item in (full, new_execution(key="plain", now=now), new_execution(now=now)):
        [outcome] = await store.execution_insert_many([item])
        assert outcome.created
        assert outcome.execution == await store.execution_get("acme", item.execution_id)
    stored = await store.execution_get("acme", full.execution_id)
    assert stored is not None and stored.concurrency == full.concurrency
    assert (stored.trace_context, stored.start_by) == (trace, full.start_by)
    [again] = await store.execution_insert_many(
        [dataclasses.replace(full, execution_id=uuid7(now))]
    )
    assert not again.created and again.execution == stored
    if not isinstance(store, PostgresStore):  # SQLite stores such text as it is
        return
    for bad in ("a\x00b", "a\ud800b"):
        with pytest.raises(Exception):  # noqa: B017 - the backend's own refusal
            await store.execution_insert_many([new_execution(key=bad, now=now)])
        stored_keys = {e.idempotency_key for e in await store.execution_list("acme", ANY, None, 50)}
        assert stored_keys == {"clé-1", "plain", None}


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
