"""The lease statements' plans with the statistics of a new database: ``shard_leases`` analyzed
by its migration, before any lease had an owner. The planner then takes any owner's leases for
one row, and the promotion's guard (``shard_lease_fence``) ran as a nested loop of every lease
row over every grant: 612,000 comparisons and 180 ms for a catch-all over 599 grants in B3
(docs/scaling.md, "The lease guard's plan")."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from tests.factories import T0
from tests.store.plan_helpers import explain_prepared, plan_nodes, prepared_names, run_sql
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.store.postgres.promotion import FENCED, _grants, fenced_params
from tickwheel.store.postgres.shard_leases import epoch_of
from tickwheel.store.postgres.store import PostgresStore, Q

pytestmark = pytest.mark.postgres

_UNOWNED = "UPDATE shard_leases SET owner = NULL, epoch = 0, expires_at = NULL, due_through = NULL"


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PostgresStore]:
    """A store whose lease rows have no owner and were analyzed so, as its migration left them."""
    store = await PostgresStore.open(pg_url, max_size=2, min_size=1)
    await store.migrate()
    await run_sql(pg_url, _UNOWNED, "ANALYZE shard_leases")
    try:
        yield store
    finally:
        await store.close()
        await run_sql(pg_url, _UNOWNED, "ANALYZE shard_leases")


async def test_the_promotions_guard_probes_each_grant_with_statistics_from_before_any_owner(
    store: PostgresStore,
) -> None:
    leases = await store.shard_lease_acquire("s", SHARD_COUNT, timedelta(seconds=60), T0)
    assert len(leases) == SHARD_COUNT
    grants = _grants("s", leases[::-1][:600], T0)  # any order: the guard locks in shard order
    async with store.pool.connection() as conn:
        await conn.execute("BEGIN")
        cursor = await conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + Q["shard_lease_fence"], grants
        )
        row = await cursor.fetchone()
        held = await (await conn.execute(Q["shard_lease_fence"], grants)).fetchall()
        await conn.execute("ROLLBACK")
    assert row is not None
    [plan] = next(iter(row.values()))
    assert [r["shard_id"] for r in held] == sorted(g for g in grants["shards"])
    lease_rows = sum(
        int(node["Actual Rows"]) * int(node["Actual Loops"])
        for node in plan_nodes(plan["Plan"])
        if node.get("Relation Name") == "shard_leases"
    )
    # One row per grant, through the primary key: no lease row read for every grant.
    assert lease_rows == 600, plan
    assert "Join Filter" not in json.dumps(plan), plan


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("shard_lease_renew", "SET expires_at = coalesce"),
        ("shard_lease_release", "SET owner = NULL"),
    ],
)
async def test_a_renewal_and_a_release_read_each_lease_row_once_in_a_generic_plan(
    store: PostgresStore, name: str, fragment: str
) -> None:
    """psycopg prepares a statement at a connection's fifth run and PostgreSQL may then keep a
    generic plan. For the renewal (every third of a lease, over every lease an owner holds) on
    these statistics that plan was a nested loop of every lease row over every grant: 1,048,576
    join-filter comparisons and 150-200 ms a renewal of 1,024 leases (an idle scheduler's
    database CPU rose from 13 to 56 ms a second over three minutes)."""
    ttl = timedelta(seconds=60)
    leases = await store.shard_lease_acquire("s", SHARD_COUNT, ttl, T0)
    params = {**_grants("s", leases, T0 + ttl / 2), "ttl": ttl, "epoch_of": epoch_of(leases)}
    plan, lease_rows = await generic_plan(store, Q[name], params, fragment)
    assert "Join Filter" not in json.dumps(plan), plan
    assert lease_rows <= SHARD_COUNT, plan


async def test_the_wheels_fenced_firing_probes_each_grant_in_a_generic_plan(
    store: PostgresStore,
) -> None:
    """The wheel's fenced firing is prepared at its connection's start (warm_promotions) on
    sessions that keep generic plans (HOT_PLANNER). On these statistics, as a join of the lease
    rows to the grants, that plan was a nested loop of every lease row over every grant: for a
    firing over 512 shards 261,632 join-filter comparisons and 50 ms, on the path from a herd's
    instant to its first start."""
    ttl = timedelta(seconds=60)
    leases = await store.shard_lease_acquire("s", SHARD_COUNT, ttl, T0)
    half = SHARD_COUNT // 2
    grants = _grants("s", leases[:half], T0 + ttl / 2)
    params = fenced_params(
        "s", grants["shards"], grants["epochs"], [], T0 + ttl / 2, ("tickwheel_ready", "p"), False
    )
    plan, lease_rows = await generic_plan(store, FENCED, params, "moved AS")
    assert "Join Filter" not in json.dumps(plan), plan
    assert lease_rows <= half, plan


async def test_an_opening_probes_each_grant_in_a_generic_plan(store: PostgresStore) -> None:
    """The opening of a herd's shards (shard_lease_open), on the path from its instant to its
    first start. As joins of the lease rows to the grants (the update's and the snapshot's),
    the generic plan on these statistics looped over every grant for every lease row, twice:
    172 ms to open 512 shards."""
    ttl = timedelta(seconds=60)
    leases = await store.shard_lease_acquire("s", SHARD_COUNT, ttl, T0)
    half = SHARD_COUNT // 2
    at = T0 + ttl / 2
    params = {**_grants("s", leases[:half], at), "through": at, "channel": "c", "payload": "p"}
    plan, lease_rows = await generic_plan(
        store, Q["shard_lease_open"], params, "SET due_through = least"
    )
    assert "Join Filter" not in json.dumps(plan), plan
    # Each grant probed for the snapshot and for the lock, and each row opened taken by its key.
    assert lease_rows <= 3 * half, plan


async def generic_plan(
    store: PostgresStore, sql: str, params: dict[str, Any], fragment: str
) -> tuple[dict[str, Any], int]:
    """The generic plan of ``sql`` (found prepared by ``fragment``) run with ``params``, and the
    lease rows its scans read: prepared by a run that matches no lease row (another owner), then
    explained whole."""
    async with store.pool.connection() as conn:
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        await conn.execute(sql, {**params, "owner": "nobody"}, prepare=True)
        [prepared] = await prepared_names(conn, fragment)
        plan = await explain_prepared(conn, prepared, sql, params)
        await conn.execute("RESET plan_cache_mode")
    lease_rows = sum(
        int(node["Actual Rows"]) * int(node["Actual Loops"])
        for node in plan_nodes(plan["Plan"])
        if node.get("Relation Name") == "shard_leases" and node["Node Type"] != "ModifyTable"
    )
    return plan, lease_rows


async def test_the_renewal_and_the_release_are_planned_with_their_grants_at_every_run(
    pg_url: str,
) -> None:
    """Prepared (psycopg's fifth run), their sessions kept a generic plan in which the grants'
    arrays are parameters read at every lease row: 7.6-8.5 ms of the database's CPU a renewal
    of 512 leases, against 1.5 ms planned with the arrays as constants (a hashed ``= ANY``).
    They are never prepared, on a pool of one session that runs them ten times."""
    store = await PostgresStore.open(pg_url, max_size=1, min_size=1)
    try:
        await store.migrate()
        await run_sql(pg_url, _UNOWNED)
        ttl = timedelta(seconds=60)
        leases = await store.shard_lease_acquire("s", SHARD_COUNT // 2, ttl, T0)
        for n in range(10):
            leases = await store.shard_lease_renew("s", leases, ttl, T0 + timedelta(seconds=n))
        assert len(leases) == SHARD_COUNT // 2
        for _ in range(10):
            await store.shard_lease_release("s", leases[:1], T0 + timedelta(seconds=10))
        async with store.pool.connection() as conn:
            assert await prepared_names(conn, "SET expires_at = coalesce") == []
            assert await prepared_names(conn, "SET owner = NULL") == []
    finally:
        await store.close()
        await run_sql(pg_url, _UNOWNED, "ANALYZE shard_leases")
