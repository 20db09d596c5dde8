"""The hot session's generic plans (store.py, HOT_PLANNER): the prepared claim is planned once
per session instead of at every run, so its plan must not depend on the batch size it cannot
see. A generic plan prices ``LIMIT $n`` at a tenth of the rows it expects; these tests give the
planner statistics that see thousands of READY rows of one tenant at several priorities (the
skew a generic plan could misjudge) and check that each claim still walks an index to its batch,
and that the generic cost does not switch on JIT (~300 ms a claim when it did, by hand)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta

import pytest
from psycopg.rows import tuple_row

from tests.factories import T0, new_execution
from tests.store.plan_helpers import (
    CLAIM_PARAMS,
    LEASE,
    emptied_store,
    executions_rows_read,
    explain,
    run_sql,
)
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.store.postgres.claims import CLAIM_UNLIMITED
from tickwheel.store.postgres.store import PostgresStore, Q

pytestmark = pytest.mark.postgres

BACKLOG = 5_000


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PostgresStore]:
    """A store on an emptied ``executions`` holding a READY backlog of one tenant at five
    priorities, analyzed so that the statistics see it."""
    async with emptied_store(pg_url) as store:
        for start in range(0, BACKLOG, 1_000):
            await store.execution_insert_many(
                [new_execution(priority=i % 5) for i in range(start, start + 1_000)]
            )
        await run_sql(pg_url, "ANALYZE executions")
        yield store


async def test_the_hot_session_plans_its_prepared_claim_once_without_jit(
    store: PostgresStore,
) -> None:
    async with store._hot.connection() as conn:
        cursor = await conn.execute(
            "SELECT current_setting('plan_cache_mode') AS mode, current_setting('jit') AS jit"
        )
        assert await cursor.fetchone() == {"mode": "force_generic_plan", "jit": "off"}
        for _ in range(8):  # psycopg prepares a statement at its fifth run
            claim = conn.cursor(row_factory=tuple_row, binary=True)
            await claim.execute(CLAIM_UNLIMITED, CLAIM_PARAMS)
            assert len(await claim.fetchall()) == 16
        cursor = await conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE '%%candidates AS MATERIALIZED%%'"
        )
        [row] = await cursor.fetchall()
    assert row["generic_plans"] >= 3 and row["custom_plans"] == 0, row


@pytest.mark.parametrize("name", ["execution_claim_ready_unlimited", "execution_claim_ready"])
async def test_a_generic_claim_walks_to_its_batch_past_a_large_backlog(
    store: PostgresStore, name: str
) -> None:
    plan = await explain(store, Q[name], CLAIM_PARAMS)
    text = json.dumps(plan)
    assert "Bitmap Heap Scan" not in text and '"JIT"' not in text, (name, plan)
    # The batch, the primary-key lookups of the update, and the tenants' probes.
    assert executions_rows_read(plan) <= 3 * 16 + 4, (name, plan)


async def test_a_generic_fair_claim_walks_each_tenants_rows_to_its_share(
    store: PostgresStore,
) -> None:
    await store.execution_insert_many([new_execution(f"t{i % 4}") for i in range(40)])
    plan = await explain(store, Q["execution_claim_ready"], CLAIM_PARAMS)
    assert '"JIT"' not in json.dumps(plan), plan
    # Up to a batch from each of five tenants, the update's lookups, the tenants' probes.
    assert executions_rows_read(plan) <= 5 * 16 + 16 + 8, plan


async def test_a_generic_direct_claim_walks_the_open_shards_to_its_batch(
    store: PostgresStore,
) -> None:
    async with store._hot.connection() as conn:
        await conn.execute("UPDATE executions SET status = 'SUCCEEDED' WHERE status = 'READY'")
    herd = [replace(new_execution(execute_in=5), shard_id=i % 8) for i in range(BACKLOG // 2)]
    for start in range(0, len(herd), 1_000):
        await store.execution_insert_many(herd[start : start + 1_000])
    async with store._hot.connection() as conn:
        await conn.execute("ANALYZE executions")
    leases = await store.shard_lease_acquire("s", SHARD_COUNT, timedelta(seconds=60), T0)
    due = T0 + timedelta(seconds=5)
    assert len(await store.shard_lease_open("s", leases, due, due)) == SHARD_COUNT
    plan = await explain(store, Q["execution_claim_ready_direct"], CLAIM_PARAMS)
    assert '"JIT"' not in json.dumps(plan), plan
    assert executions_rows_read(plan) <= 3 * 16 + 4, plan
    claimed = await store.execution_claim_ready("w1", 16, LEASE, due)
    assert len(claimed) == 16
