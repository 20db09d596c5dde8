"""Due hints: the (shard, executeAt) pairs an insert announces so that the shard's scheduler
fires the execution from its timing wheel. The payload format and its size limit (pure), one
NOTIFY per insert batch on PostgreSQL, and a scheduler on another store firing a hinted
execution at its instant rather than at its next window load."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from tests.factories import T0, new_execution
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.domain.states import ExecutionStatus
from tickwheel.engine.scheduler import Scheduler
from tickwheel.observability.metrics import Metrics
from tickwheel.store.due import HINT_HORIZON, DueHints, DueNews, hint_pairs
from tickwheel.store.postgres.notify import (
    PAYLOAD_LIMIT,
    DuePayload,
    due_payload,
    parse_due_payload,
)
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.protocol import Store, Topic

MS = timedelta(milliseconds=1)


def test_pairs_are_grouped_by_instant_and_rounded_up_to_the_millisecond() -> None:
    at = datetime(2026, 3, 1, 12, 0, 2, 500_400, tzinfo=UTC)
    payload = due_payload("me", [(7, at), (3, at), (7, at + timedelta(seconds=1))])
    ms = (at - datetime(1970, 1, 1, tzinfo=UTC)) // MS + 1
    assert payload == f"me {ms}:3.7;{ms + 1000}:7"
    rounded = at.replace(microsecond=501_000)
    expected = [(3, rounded), (7, rounded), (7, rounded + 1000 * MS)]
    assert parse_due_payload(payload) == DuePayload("me", expected)
    assert parse_due_payload("me") == DuePayload("me", [])
    assert parse_due_payload("me 12:x").unreadable  # its hints are lost


def test_a_herd_fits_and_a_spread_that_does_not_becomes_its_span() -> None:
    herd = [(shard, T0) for shard in range(SHARD_COUNT)]  # every shard at one instant
    assert len(due_payload("o" * 32, herd)) <= PAYLOAD_LIMIT < 8000
    assert parse_due_payload(due_payload("o", herd)).pairs == herd
    first = T0 + 300 * timedelta(microseconds=1)
    spread = [(shard, first + shard * MS) for shard in range(SHARD_COUNT)]
    payload = due_payload("o", spread)
    assert len(payload) < 40
    # Rounded outward to the millisecond: the span covers every instant listed.
    assert parse_due_payload(payload) == DuePayload("o", [], (T0, T0 + 1024 * MS))


async def test_only_scheduled_executions_due_within_the_horizon_are_hinted(
    store: Store,
) -> None:
    far = HINT_HORIZON.total_seconds() + 1
    items = [new_execution(execute_in=d, key=f"h{d}") for d in (2, 5, far)]
    items.append(new_execution(key="now"))  # due at once: inserted READY
    executions = [o.execution for o in await store.execution_insert_many(items)]
    assert executions[3].status is ExecutionStatus.READY
    assert hint_pairs(executions) == sorted((e.shard_id, e.execute_at) for e in executions[:2])
    # Hints reach this process's subscribers when the insert commits. On PostgreSQL the inbox
    # also starts the listener, whose LISTEN taking effect marks earlier hints lost: wait for it
    # (the insert is one round trip, quicker than the listener's connection).
    inbox = store.due_hints()
    if isinstance(store, PostgresStore):
        assert await store.listen(5)
        inbox.take()
    [again] = await store.execution_insert_many([new_execution(execute_in=3, key="h3")])
    # (A DUE signal: the scheduler asks for its next retry again too.)
    hinted = [(again.execution.shard_id, again.execution.execute_at)]
    assert inbox.take() == DueNews(hinted, poked=True)


def test_an_inbox_that_overflows_says_it_lost_hints() -> None:
    inbox = DueHints(limit=3)
    inbox.put([(1, T0), (2, T0)])
    inbox.put_span(T0, T0 + MS)
    assert inbox.take() == DueNews([(1, T0), (2, T0)], [(T0, T0 + MS)])
    inbox.put([(1, T0), (2, T0), (3, T0), (4, T0)])
    assert inbox.take() == DueNews(lost=True)
    assert inbox.take() == DueNews()
    inbox.poke()  # a DUE signal without hints (an execution gone to RETRY_WAIT)
    assert inbox.take() == DueNews(poked=True)
    assert inbox.take() == DueNews()


@pytest.fixture
async def two_stores(pg_url: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    sender = await PostgresStore.open(pg_url, max_size=1)
    receiver = await PostgresStore.open(pg_url, max_size=2)
    try:
        await sender.migrate()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                "TRUNCATE executions, attempts, execution_events, definitions, pauses CASCADE"
            )
            conn.execute("UPDATE shard_leases SET owner = NULL, epoch = 0, expires_at = NULL")
        yield sender, receiver
    finally:
        await sender.close()
        await receiver.close()


@pytest.mark.postgres
async def test_one_notify_per_insert_batch_lists_its_pairs(
    pg_url: str, two_stores: tuple[PostgresStore, PostgresStore]
) -> None:
    sender, _ = two_stores
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as listener:
        await listener.execute("LISTEN tickwheel_due")
        batch = [new_execution(execute_in=2 + i, key=f"n{i}") for i in range(5)]
        inserted = [o.execution for o in await sender.execution_insert_many(batch)]
        got = []
        async for n in listener.notifies(timeout=2):
            got.append(n.payload)
        [payload] = got
        pairs = parse_due_payload(payload).pairs
        assert sorted(pairs) == sorted((e.shard_id, e.execute_at) for e in inserted)
        assert len(payload.encode()) < 8000


@pytest.mark.postgres
async def test_a_scheduler_fires_an_execution_inserted_by_another_process_at_its_time(
    two_stores: tuple[PostgresStore, PostgresStore],
) -> None:
    sender, receiver = two_stores
    assert await receiver.listen(5)
    clock = FakeClock(T0)
    scheduler = Scheduler(receiver, clock)
    scheduler.metrics = Metrics()
    await scheduler.run_once()  # the window [T0, T0 + 30 s] is loaded, empty
    clock.advance(1)
    [outcome] = await sender.execution_insert_many(
        [new_execution(execute_in=2, now=clock.now(), key=uuid.uuid4().hex)]
    )
    assert await receiver.wait_for(Topic.DUE, 5)  # the NOTIFY, with its pair, arrived
    assert await scheduler.run_once() == 0
    assert scheduler.wheel is not None and scheduler.wheel.next_due() == T0 + 3 * 1000 * MS
    clock.advance(2)
    assert scheduler._next_refresh is not None and clock.now() < scheduler._next_refresh
    assert await scheduler.run_once() == 1
    got = await receiver.execution_get("acme", outcome.execution.execution_id)
    assert got is not None and got.status is ExecutionStatus.READY
    assert got.ready_at == T0 + timedelta(seconds=3)
    await asyncio.sleep(0)


@pytest.mark.postgres
async def test_a_batch_too_spread_to_list_is_fired_from_its_span(
    two_stores: tuple[PostgresStore, PostgresStore],
) -> None:
    sender, receiver = two_stores
    assert await receiver.listen(5)
    clock = FakeClock(T0)
    scheduler = Scheduler(receiver, clock)
    scheduler.metrics = Metrics()
    await scheduler.run_once()
    clock.advance(1)
    # 600 instants a millisecond apart: far more than 8000 bytes of pairs.
    batch = [
        new_execution(execute_in=1 + i / 1000, now=clock.now(), key=uuid.uuid4().hex)
        for i in range(600)
    ]
    await sender.execution_insert_many(batch)
    assert await receiver.wait_for(Topic.DUE, 5)
    assert await scheduler.run_once() == 0
    clock.set(T0 + timedelta(seconds=2.3))
    assert scheduler._next_refresh is not None and clock.now() < scheduler._next_refresh
    assert await scheduler.run_once() == 301  # due at 2.000 ... 2.300 s
    clock.set(T0 + timedelta(seconds=2.6))
    assert await scheduler.run_once() == 299
