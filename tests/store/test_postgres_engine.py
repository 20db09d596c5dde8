"""PostgreSQL-only behaviour of the engine's store methods: the plans that keep a tick's cost
following the due work, LISTEN/NOTIFY between stores, and promotions racing each other. The
semantics on both backends are the conformance suite's (tests/engine)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.conftest import empty_pg_tables
from tests.factories import T0, definition, new_execution
from tests.store.test_concurrency import LEASE, claim, inputs_of, keyed, lost_lease
from tickwheel.domain.states import ExecutionStatus
from tickwheel.store.postgres.notify import Signals
from tickwheel.store.postgres.store import PostgresStore, Q
from tickwheel.store.protocol import Topic

pytestmark = pytest.mark.postgres

_TABLES = "execution_events, attempts, executions, definitions, api_keys, pauses"
ALL_SHARDS = list(range(1024))
SHARD = 7
NOW = T0 + timedelta(seconds=60)
DUE = 5

OpenStore = Callable[[int], Awaitable[PostgresStore]]


@pytest.fixture
async def open_pg(pg_url: str) -> AsyncIterator[OpenStore]:
    """Opens PostgresStores (each its own pool) on the session database, emptied first."""
    stores: list[PostgresStore] = []

    async def open_store(connections: int) -> PostgresStore:
        store = await PostgresStore.open(pg_url, max_size=connections, min_size=connections)
        stores.append(store)
        return store

    first = await open_store(1)
    await first.migrate()
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute(f"TRUNCATE {_TABLES} CASCADE")
    try:
        yield open_store
    finally:
        for store in stores:
            await store.close()


async def _sql(pg_url: str, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        cursor = await conn.execute(query, params)
        return await cursor.fetchall() if cursor.description else []


# -- plans: a tick reads the due rows, not the backlog ------------------------------------------


async def _backlog(store: PostgresStore) -> None:
    """20,000 SCHEDULED executions an hour or more ahead and ``DUE`` due at ``NOW``, all in one
    shard, so that a query reading the backlog would show it."""
    d = definition()
    future = [new_execution(execute_in=3600 + n, d=d) for n in range(20_000)]
    due = [new_execution(execute_in=10 + n, d=d) for n in range(DUE)]
    items = [replace(i, shard_id=SHARD) for i in future + due]
    for start in range(0, len(items), 2_000):
        await store.execution_insert_many(items[start : start + 2_000])


async def _turn_into(pg_url: str, status: str, time_column: str) -> None:
    """Every row into ``status``, with its executeAt as the time that status is found by; then
    statistics as in production."""
    update = sql.SQL("UPDATE executions SET status = %s, {} = execute_at").format(
        sql.Identifier(time_column)
    )
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute(update, [status])
        await conn.execute("VACUUM ANALYZE executions")


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


async def _explain_analyze(pg_url: str, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan nodes of ``query`` as run (in a transaction rolled back afterwards)."""
    async with await psycopg.AsyncConnection.connect(pg_url) as conn:
        cursor = await conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + Q[query], params)
        [(plan,)] = await cursor.fetchall()
        await conn.rollback()
    return list(_nodes(plan[0]["Plan"]))


def _scans_of_executions(nodes: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [
        (n["Node Type"], n.get("Index Name"))
        for n in nodes
        if "Scan" in n["Node Type"]
        and n.get("Relation Name", "executions") == "executions"
        and n["Node Type"] != "CTE Scan"
    ]


def _node_on(nodes: list[dict[str, Any]], index: str) -> dict[str, Any]:
    [node] = [n for n in nodes if n.get("Index Name") == index]
    return node


def _assert_reads_only_the_due(node: dict[str, Any]) -> None:
    # The due rows and a few pages: reading the 20,000 others of the shard would take hundreds
    # of index and heap pages (and they would show as rows or as rows removed by a filter).
    assert node["Actual Rows"] == DUE, node
    assert node.get("Rows Removed by Filter", 0) == 0, node
    assert node["Shared Hit Blocks"] + node["Shared Read Blocks"] < 20, node


async def test_each_tick_reads_the_due_rows_through_its_partial_index_not_the_backlog(
    open_pg: OpenStore, pg_url: str
) -> None:
    store = await open_pg(1)
    await _backlog(store)
    await _sql(pg_url, "VACUUM ANALYZE executions")

    # SCHEDULED -> READY through executions_due, for the shard that holds the backlog...
    params: dict[str, Any] = {"shards": [SHARD], "limit": 500, "now": NOW}
    nodes = await _explain_analyze(pg_url, "execution_promote_scheduled", params)
    assert _scans_of_executions(nodes) == [
        ("Index Scan", "executions_due"),
        ("Index Scan", "executions_pkey"),  # the UPDATE finding the rows the CTE locked
    ]
    _assert_reads_only_the_due(_node_on(nodes, "executions_due"))
    # ... and for a scheduler owning every shard: one probe per shard, no scan of the table.
    # (Index scan or bitmap scan of executions_due: the costs are close; both read the index.)
    params["shards"] = ALL_SHARDS
    nodes = await _explain_analyze(pg_url, "execution_promote_scheduled", params)
    scans = _scans_of_executions(nodes)
    assert "Seq Scan" not in {kind for kind, _ in scans}, scans
    assert {index for _, index in scans} == {"executions_due", "executions_pkey"}, scans
    assert _node_on(nodes, "executions_due")["Actual Rows"] == DUE
    # The scheduler's look ahead stops at its horizon.
    params = {"shards": [SHARD], "horizon": NOW}
    nodes = await _explain_analyze(pg_url, "execution_next_scheduled_at", params)
    assert "Seq Scan" not in {kind for kind, _ in _scans_of_executions(nodes)}
    _assert_reads_only_the_due(_node_on(nodes, "executions_due"))
    assert await store.execution_next_due_at([SHARD], NOW) == T0 + timedelta(seconds=10)
    assert await store.execution_next_due_at([SHARD + 1], NOW) is None
    assert (await store.execution_promote_due([SHARD], 500, NOW)).promoted == DUE

    # RETRY_WAIT -> READY through executions_retry_due.
    await _turn_into(pg_url, "RETRY_WAIT", "next_attempt_at")
    params = {"shards": ALL_SHARDS, "limit": 500, "now": NOW}
    nodes = await _explain_analyze(pg_url, "execution_promote_retries", params)
    assert _scans_of_executions(nodes) == [
        ("Index Scan", "executions_retry_due"),
        ("Index Scan", "executions_pkey"),
    ]
    _assert_reads_only_the_due(_node_on(nodes, "executions_retry_due"))
    params = {"shards": ALL_SHARDS, "horizon": NOW}
    nodes = await _explain_analyze(pg_url, "execution_next_retry_at", params)
    assert _scans_of_executions(nodes) == [("Index Scan", "executions_retry_due")]
    assert _node_on(nodes, "executions_retry_due")["Actual Rows"] == 1  # min() reads the first
    assert await store.execution_next_due_at(ALL_SHARDS, NOW) == T0 + timedelta(seconds=10)
    assert (await store.execution_promote_due(ALL_SHARDS, 500, NOW)).promoted == DUE

    # Expired leases through executions_running_lease.
    await _turn_into(pg_url, "RUNNING", "lease_expires_at")
    nodes = await _explain_analyze(pg_url, "execution_lease_expired", {"limit": 100, "now": NOW})
    assert _scans_of_executions(nodes) == [("Index Scan", "executions_running_lease")]
    _assert_reads_only_the_due(_node_on(nodes, "executions_running_lease"))
    expired = await store.execution_lease_expired(100, NOW)
    assert [e.lease_expires_at for e in expired] == [
        T0 + timedelta(seconds=10 + n) for n in range(DUE)
    ]


# -- LISTEN/NOTIFY ------------------------------------------------------------------------------


async def test_a_ready_insert_wakes_a_waiter_on_another_store(open_pg: OpenStore) -> None:
    sender, receiver = await open_pg(1), await open_pg(1)
    assert await receiver.listen(5)
    waiter = asyncio.create_task(receiver.wait_for(Topic.READY, 5))
    started = time.perf_counter()
    [outcome] = await sender.execution_insert_many([new_execution()])
    assert outcome.execution.status is ExecutionStatus.READY
    assert await waiter
    assert time.perf_counter() - started < 1
    # A SCHEDULED insert concerns schedulers, not workers.
    assert not await receiver.wait_for(Topic.DUE, 0)


async def test_a_scheduled_insert_wakes_a_due_waiter_on_another_store(open_pg: OpenStore) -> None:
    sender, receiver = await open_pg(1), await open_pg(1)
    assert await receiver.listen(5)
    waiter = asyncio.create_task(receiver.wait_for(Topic.DUE, 5))
    started = time.perf_counter()
    [outcome] = await sender.execution_insert_many([new_execution(execute_in=600)])
    assert outcome.execution.status is ExecutionStatus.SCHEDULED
    assert await waiter
    assert time.perf_counter() - started < 1
    assert not await receiver.wait_for(Topic.READY, 0.2)


async def test_promotion_wakes_workers_of_another_store(open_pg: OpenStore) -> None:
    scheduler, worker = await open_pg(1), await open_pg(1)
    await scheduler.execution_insert_many([new_execution(execute_in=10)])
    assert await worker.listen(5)
    waiter = asyncio.create_task(worker.wait_for(Topic.READY, 5))
    assert (await scheduler.execution_promote_due(ALL_SHARDS, 10, NOW)).promoted == 1
    assert await asyncio.wait_for(waiter, 1)
    # Nothing moved, nothing sent.
    assert (await scheduler.execution_promote_due(ALL_SHARDS, 10, NOW)).promoted == 0
    assert not await worker.wait_for(Topic.READY, 0.3)


async def test_with_nothing_happening_wait_for_returns_false_at_its_timeout(
    open_pg: OpenStore,
) -> None:
    store = await open_pg(1)
    started = time.perf_counter()
    assert not await store.wait_for(Topic.READY, 0.3)
    assert 0.29 <= time.perf_counter() - started < 1
    assert not await store.wait_for(Topic.DUE, 0.1)


async def test_a_store_wakes_its_own_waiters_once(open_pg: OpenStore) -> None:
    store = await open_pg(1)
    assert await store.listen(5)
    # Signalled in-process right after the commit; its own notification, when it comes back
    # through LISTEN, does not wake the waiter a second time.
    await store.execution_insert_many([new_execution()])
    assert await store.wait_for(Topic.READY, 0)
    assert not await store.wait_for(Topic.READY, 0.3)


async def test_the_listener_comes_back_after_its_connection_is_killed(
    open_pg: OpenStore, pg_url: str
) -> None:
    sender, receiver = await open_pg(1), await open_pg(1)
    assert await receiver.listen(5)
    killed = await _sql(
        pg_url,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = current_database() AND starts_with(query, 'LISTEN')",
    )
    assert killed == [(True,)]
    # The drop wakes the workers at once: they wait long between polls only while the store
    # hears (WorkerSettings.heard_poll), and it no longer does.
    assert await receiver.wait_for(Topic.READY, 5)
    assert not receiver.hears_all()
    # Signals sent while it was down are lost, so the reconnected listener wakes every waiter
    # once; until then waits end at their timeout.
    deadline = time.monotonic() + 10
    while not await receiver.wait_for(Topic.DUE, 0.2):
        assert time.monotonic() < deadline, "the listener did not reconnect"
    assert receiver.hears_all()
    assert await receiver.wait_for(Topic.READY, 0)
    waiter = asyncio.create_task(receiver.wait_for(Topic.READY, 5))
    await sender.execution_insert_many([new_execution()])
    assert await asyncio.wait_for(waiter, 1)


async def test_a_slot_freed_by_a_reap_or_an_expiry_wakes_another_process_workers(
    open_pg: OpenStore, pg_url: str
) -> None:
    """The reaper's and the late claim's ways out of RUNNING NOTIFY the workers when the row
    held a concurrency slot, as a finish does: a worker that hears polls seldom."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        empty_pg_tables(conn)  # what other files' tests left (their limits and leases) too
    sender, receiver = await open_pg(2), await open_pg(1)
    assert await receiver.listen(5) and receiver.hears_all()
    await sender.execution_insert_many([keyed("a", n, at=n) for n in range(3)])
    assert await receiver.wait_for(Topic.READY, 5)  # the insert's
    [lost] = await claim(sender)
    assert lost.fencing_token is not None
    reaped = lost_lease(lost)
    assert await sender.execution_reap([reaped], T0 + LEASE + timedelta(minutes=1))
    assert await receiver.wait_for(Topic.READY, 5)
    [late] = await claim(sender)
    assert late.fencing_token is not None
    error = {"kind": "expired", "message": "claimed after its startBy"}
    assert await sender.execution_expire_claimed(late.execution_id, late.fencing_token, error)
    assert await receiver.wait_for(Topic.READY, 5)
    assert inputs_of(await claim(sender)) == [("a", 2)]


async def test_without_a_server_wait_for_just_times_out() -> None:
    signals = Signals("postgresql://nobody@127.0.0.1:1/none?connect_timeout=1")
    try:
        for _ in range(3):
            started = time.perf_counter()
            assert not await signals.wait_for(Topic.READY, 0.2)
            assert time.perf_counter() - started < 1
        assert not await signals.listen(0.2)
    finally:
        await signals.close()


# -- concurrency --------------------------------------------------------------------------------


async def test_concurrent_promoters_move_each_due_execution_once(
    open_pg: OpenStore, pg_url: str
) -> None:
    submitter = await open_pg(1)
    d = definition()
    items = [new_execution(execute_in=1 + n / 100, d=d) for n in range(1_000)]
    await submitter.execution_insert_many(items)
    schedulers = [await open_pg(1), await open_pg(1)]

    async def promote_all(store: PostgresStore) -> list[int]:
        moved: list[int] = []
        while n := (await store.execution_promote_due(ALL_SHARDS, 50, NOW)).promoted:
            moved.append(n)
        return moved

    first, second = await asyncio.gather(*(promote_all(s) for s in schedulers))
    assert sum(first) + sum(second) == 1_000
    assert first and second, "the promoters did not overlap"
    assert await _sql(
        pg_url, "SELECT status, ready_at, count(*) FROM executions GROUP BY 1, 2"
    ) == [("READY", NOW, 1_000)]


async def test_promotion_skips_rows_locked_elsewhere_instead_of_waiting(
    open_pg: OpenStore, pg_url: str
) -> None:
    store = await open_pg(1)
    items = [new_execution(execute_in=10) for _ in range(100)]
    await store.execution_insert_many(items)
    locked = [i.execution_id for i in items[:10]]
    # Another transaction (a cancel, a second scheduler) holds ten of the rows.
    async with await psycopg.AsyncConnection.connect(pg_url) as conn:
        await conn.execute(
            "SELECT 1 FROM executions WHERE execution_id = ANY(%s) FOR UPDATE", [locked]
        )
        promoted = await asyncio.wait_for(store.execution_promote_due(ALL_SHARDS, 500, NOW), 5)
        assert promoted.promoted == 90
        await conn.rollback()
    assert (await store.execution_promote_due(ALL_SHARDS, 500, NOW)).promoted == 10
