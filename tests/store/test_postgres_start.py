"""What a process's start asks of PostgreSQL before its first claim: a worker's claim
connections are made while it starts, not on the first claim's path, with the claims and the
finish prepared on each, and the migration check of an up-to-date database is one read that no
migration lock holds up."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import psycopg
import pytest
from psycopg_pool import PoolTimeout

from tests.factories import T0, new_execution
from tickwheel.domain.models import ShardLease
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.store.postgres.migrating import MIGRATION_LOCK
from tickwheel.store.postgres.pool import Conn
from tickwheel.store.postgres.store import HOT_CONNECTIONS, PROMOTE_CONNECTIONS, PostgresStore
from tickwheel.store.protocol import AttemptResult

pytestmark = pytest.mark.postgres


async def test_a_process_with_a_worker_connects_its_claims_at_open(pg_url: str) -> None:
    store = await PostgresStore.open(pg_url, claims=True)
    try:
        hot = store._hot
        assert hot is not store.pool and hot.min_size == HOT_CONNECTIONS == 2
        await hot.wait(timeout=10)  # made in the background: ready without any claim
        # Both: the second one, made on demand before, was made at a herd's first finish.
        assert hot.get_stats()["pool_available"] == HOT_CONNECTIONS
    finally:
        await store.close()


async def _prepared(conn: Conn) -> dict[str, tuple[int, int]]:
    cursor = await conn.execute(
        "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
    )
    rows = await cursor.fetchall()
    return {r["statement"]: (r["generic_plans"], r["custom_plans"]) for r in rows}


async def test_a_workers_claims_and_finish_are_prepared_on_each_hot_connection_at_open(
    pg_url: str,
) -> None:
    """Before any claim, both hot sessions hold the claims and the finish prepared (run once
    as no-ops, planned generic); a worker's first claim and finish then find them prepared
    (psycopg keys them by their parameters' types too) and prepare nothing more."""
    first = await PostgresStore.open(pg_url)
    try:
        await first.migrate()
        await first.execution_insert_many([new_execution() for _ in range(3)])
    finally:
        await first.close()
    store = await PostgresStore.open(pg_url, claims=True)
    try:
        await store._hot.wait(timeout=10)
        async with store._hot.connection() as a, store._hot.connection() as b:
            before = [await _prepared(a), await _prepared(b)]
        for seen in before:
            # The existence of a bucket, the plain and fair claims, the finish (not the direct
            # claim: its plan is made at a herd, claims.py warm_claims).
            assert len(seen) == 4, seen
            assert all(plans == (1, 0) for plans in seen.values()), seen
        # As a worker with the system clock claims and finishes (``now`` None).
        [claimed] = await store.execution_claim_ready("w1", 1, timedelta(seconds=30), None)
        assert claimed.fencing_token is not None
        result = AttemptResult(
            claimed.execution_id,
            claimed.fencing_token,
            AttemptStatus.SUCCEEDED,
            ExecutionStatus.SUCCEEDED,
            output={"ok": True},
        )
        assert await store.attempt_finish_many([result]) == [True]
        async with store._hot.connection() as a, store._hot.connection() as b:
            after = [await _prepared(a), await _prepared(b)]
        assert [set(seen) for seen in after] == [set(seen) for seen in before]  # none added
        runs = {
            text: sum(seen[text][0] for seen in after) - sum(seen[text][0] for seen in before)
            for text in after[0]
        }
        assert sorted(runs.values()) == [0, 1, 1, 1], runs  # bucket check, claim, finish
        assert all(plans[1] == 0 for seen in after for plans in seen.values()), after
    finally:
        async with store.pool.connection() as conn:
            await conn.execute(
                "UPDATE shard_leases SET owner = NULL, epoch = 0, expires_at = NULL"
                " WHERE shard_id = 3"
            )
        await store.close()


async def test_a_process_without_a_worker_never_connects_them(pg_url: str) -> None:
    store = await PostgresStore.open(pg_url)
    try:
        await store.ping()
        assert store._hot.min_size == 0
        assert store._hot.get_stats().get("pool_size", 0) == 0
    finally:
        await store.close()


async def test_a_store_that_is_down_fails_at_open_whatever_it_runs() -> None:
    """The hot pool's connection is not waited for: the main pool's still decides."""
    url = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"
    for claims in (False, True):
        with pytest.raises(PoolTimeout):
            await PostgresStore.open(url, timeout=1.0, claims=claims)


async def test_the_check_of_an_up_to_date_database_takes_no_migration_lock(pg_url: str) -> None:
    """A start is not held up by whoever holds the lock (a 'db upgrade' of another version, a
    long migration elsewhere) when this version has nothing to apply."""
    store = await PostgresStore.open(pg_url)
    try:
        await store.migrate()  # up to date (the session's database is already)
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as holder:
            await holder.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
            try:
                assert await asyncio.wait_for(store.migrations_pending(), 10) == []
            finally:
                await holder.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
    finally:
        await store.close()


async def test_a_process_with_a_scheduler_prepares_its_promotions_at_open(pg_url: str) -> None:
    """The wheel's promotions run on connections of their own, made at open with the fenced
    and the unleased promotion by id prepared (run as no-ops: nothing promoted, fenced or
    notified); a leased promotion with the system clock's ``now`` then reuses the plan, and a
    grant gone stale still promotes nothing through it."""
    first = await PostgresStore.open(pg_url)
    try:
        await first.migrate()
    finally:
        await first.close()
    store = await PostgresStore.open(pg_url, promotes=True)
    try:
        fire = store._fire
        assert fire is not store.pool and fire.min_size == PROMOTE_CONNECTIONS == 2
        await fire.wait(timeout=10)
        async with fire.connection() as a, fire.connection() as b:
            before = [await _prepared(a), await _prepared(b)]
            cursor = await a.execute("SELECT current_setting('plan_cache_mode') AS mode")
            assert await cursor.fetchone() == {"mode": "force_generic_plan"}
        for seen in before:
            assert len(seen) == 2 and all(p == (1, 0) for p in seen.values()), seen
        items = [replace(new_execution(execute_in=5, key=f"p{n}"), shard_id=3) for n in range(2)]
        await store.execution_insert_many(items)  # due long ago by the database's clock
        async with store.pool.connection() as conn:  # shard 3 granted to s1, at epoch 7
            await conn.execute(
                "UPDATE shard_leases SET owner = 's1', epoch = 7,"
                " expires_at = now() + interval '30 seconds' WHERE shard_id = 3"
            )
        mine = ShardLease(3, "s1", 7, T0)  # (the fence reads the expiry from the row)
        ids = [i.execution_id for i in items]
        # The first id's shard taken over meanwhile (a newer epoch): the stale grant is fenced.
        stale = replace(mine, epoch=6)
        fenced = await store.execution_promote_ids_leased("s1", [stale], ids[:1])
        assert fenced.moved == {} and fenced.fenced == [3]
        promoted = await store.execution_promote_ids_leased("s1", [mine], ids[1:])
        assert set(promoted.moved) == set(ids[1:]) and promoted.fenced == []
        async with fire.connection() as a, fire.connection() as b:
            after = [await _prepared(a), await _prepared(b)]
        assert [set(seen) for seen in after] == [set(seen) for seen in before]  # none added
        fenced_runs = sum(
            seen[text][0] for seen in after for text in seen if "held AS MATERIALIZED" in text
        )
        assert fenced_runs == 2 + 2  # the two no-ops, then the stale and the good promotion
        assert all(plans[1] == 0 for seen in after for plans in seen.values()), after
    finally:
        async with store.pool.connection() as conn:
            await conn.execute(
                "UPDATE shard_leases SET owner = NULL, epoch = 0, expires_at = NULL"
                " WHERE shard_id = 3"
            )
        await store.close()
