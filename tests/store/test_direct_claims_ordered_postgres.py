"""The ordered direct claim (docs/scaling.md, "The direct claim in id order") against real,
parallel connections on PostgreSQL: a row a cancel holds is skipped, not waited for; cancels,
promotions and several claimers racing over one herd move each row exactly once; another
tenant's locked rows neither block the walk nor are taken."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta

import psycopg
import pytest

from tests.conftest import empty_pg_tables
from tests.factories import T0, new_execution
from tickwheel.domain.models import Execution, ShardLease
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.store.postgres.store import PostgresStore

pytestmark = pytest.mark.postgres

LEASE = timedelta(seconds=30)
THROUGH = T0 + timedelta(days=1)  # by the database's clock: T0 is in its past


@pytest.fixture
async def pg_store(pg_url: str) -> AsyncIterator[PostgresStore]:
    """A store of two connections on emptied tables, every shard reset (closed, no owner)."""
    store = await PostgresStore.open(pg_url, max_size=2, min_size=2)
    await store.migrate()
    # Every table emptied (empty_pg_tables), not only the executions' and the pauses: a rate limit,
    # a tenant weight or a breaker another test file left in the session's database would hold
    # the herd's rows back from the claims.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        empty_pg_tables(conn)
    try:
        yield store
    finally:
        await store.close()


async def open_all(store: PostgresStore) -> list[ShardLease]:
    leases = await store.shard_lease_acquire("s", SHARD_COUNT, timedelta(minutes=5))
    assert len(await store.shard_lease_open("s", leases, THROUGH)) == SHARD_COUNT
    return leases


async def _rows(pg_url: str, sql: str, *params: object) -> list[tuple[object, ...]]:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        cursor = await conn.execute(sql, params)
        return await cursor.fetchall()


async def test_a_row_a_cancel_holds_is_skipped_then_never_claimed(
    pg_store: PostgresStore, pg_url: str
) -> None:
    herd = [new_execution(execute_in=1) for _ in range(6)]
    await pg_store.execution_insert_many(herd)
    await open_all(pg_store)
    [first] = await pg_store.execution_claim_ready("w", 1, LEASE)
    rest = sorted(
        (i for i in herd if i.execution_id != first.execution_id), key=lambda i: str(i.execution_id)
    )
    held = rest[0]
    async with await psycopg.AsyncConnection.connect(pg_url) as cancel:
        # A cancel in flight: it holds the row's lock until it commits.
        await cancel.execute(
            "UPDATE executions SET status = 'CANCELLED' WHERE execution_id = %s",
            [held.execution_id],
        )
        got = await asyncio.wait_for(pg_store.execution_claim_ready("w", 10, LEASE), 10)
        await cancel.commit()
    taken = {e.execution_id for e in got}
    assert held.execution_id not in taken
    assert taken == {i.execution_id for i in rest[1:]}
    assert await pg_store.execution_claim_ready("w", 10, LEASE) == []
    [(status, attempts)] = await _rows(
        pg_url,
        "SELECT status, (SELECT count(*) FROM attempts a WHERE a.execution_id = e.execution_id)"
        " FROM executions e WHERE execution_id = %s",
        held.execution_id,
    )
    assert (status, attempts) == ("CANCELLED", 0)


async def test_another_tenants_locked_rows_neither_block_the_walk_nor_are_taken(
    pg_store: PostgresStore, pg_url: str
) -> None:
    """Rows of another tenant between the herd's ids, in open shards: due after the shards'
    due_through, or due and locked by a transaction that does not end. The herd's claims go on
    without waiting, take none of them, and keep their place in the herd's tenant."""
    later = timedelta(days=2).total_seconds()  # past THROUGH
    items = [new_execution(execute_in=1)]
    for n in range(20):
        evil = [replace(new_execution("evil", execute_in=later), shard_id=5) for _ in range(5)]
        evil.append(replace(new_execution("evil", execute_in=1), shard_id=n))  # due, locked
        items += [*evil, new_execution(execute_in=1)]
    await pg_store.execution_insert_many(items)
    await open_all(pg_store)
    async with await psycopg.AsyncConnection.connect(pg_url) as holder:
        await holder.execute(
            "SELECT 1 FROM executions WHERE tenant = 'evil' FOR UPDATE"
        )  # every one of them locked until the end
        claimed: list[Execution] = []
        while got := await asyncio.wait_for(pg_store.execution_claim_ready("w", 3, LEASE), 10):
            claimed += got
        await holder.rollback()
    assert sorted(str(e.execution_id) for e in claimed) == sorted(
        str(i.execution_id) for i in items if i.tenant == "acme"
    )
    assert pg_store._order.tenant in (None, "acme")
    rows = await _rows(pg_url, "SELECT DISTINCT status FROM executions WHERE tenant = 'evil'")
    assert rows == [("SCHEDULED",)]


async def test_claimers_cancels_and_promotions_racing_over_a_herd_move_each_row_once(
    pg_store: PostgresStore, pg_url: str
) -> None:
    """Three stores claim a herd in id order (each from its own place) while a cancel and a
    promotion by id go through random rows of it: every row ends cancelled and never attempted,
    or claimed once (promoted rows through READY), with one attempt of its token."""
    herd = [new_execution(execute_in=1) for _ in range(600)]  # over ~450 shards
    await pg_store.execution_insert_many(herd)
    leases = await open_all(pg_store)
    claimers = [await PostgresStore.open(pg_url, max_size=1, min_size=1) for _ in range(3)]
    other = await PostgresStore.open(pg_url, max_size=2, min_size=2)
    shuffled = [i.execution_id for i in herd]
    random.Random(13).shuffle(shuffled)
    to_cancel, to_promote = shuffled[:100], shuffled[100:200]
    claimed: list[Execution] = []
    cancelled: set[uuid.UUID] = set()
    places: set[object] = set()

    async def claim_all(store: PostgresStore, worker: str) -> None:
        idle = 0
        while idle < 3:
            got = await store.execution_claim_ready(worker, 8, LEASE)
            claimed.extend(got)
            places.add(store._order.place())
            idle = 0 if got else idle + 1
            await asyncio.sleep(0)

    async def cancel_some() -> None:
        for execution_id in to_cancel:
            # None: the claim took the row first (a RUNNING row is not cancelled here).
            if await other.execution_cancel("acme", execution_id, T0 + timedelta(seconds=2)):
                cancelled.add(execution_id)

    async def promote_some() -> None:
        for start in range(0, len(to_promote), 10):
            await pg_store.execution_promote_ids_leased("s", leases, to_promote[start : start + 10])

    try:
        await asyncio.gather(
            *(claim_all(s, f"w{n}") for n, s in enumerate(claimers)), cancel_some(), promote_some()
        )
        claimed += await claimers[0].execution_claim_ready("w0", 1000, LEASE)  # READY leftovers
    finally:
        for store in (*claimers, other):
            await store.close()
    ids = [e.execution_id for e in claimed]
    assert len(ids) == len(set(ids))  # no row claimed twice
    assert set(ids) | cancelled == {i.execution_id for i in herd}
    assert not set(ids) & cancelled
    assert len({e.fencing_token for e in claimed}) == len(claimed)
    assert any(p is not None for p in places)  # the ordered walk ran
    mismatched = await _rows(
        pg_url,
        "SELECT count(*) FROM executions e LEFT JOIN attempts a USING (execution_id)"
        " WHERE (e.status = 'RUNNING' AND (a.attempt_number IS DISTINCT FROM 1"
        " OR a.fencing_token IS DISTINCT FROM e.fencing_token))"
        " OR (e.status = 'CANCELLED' AND a.execution_id IS NOT NULL)"
        " OR e.status NOT IN ('RUNNING', 'CANCELLED')",
    )
    assert mismatched == [(0,)]
