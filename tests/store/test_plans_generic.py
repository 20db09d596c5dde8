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
from typing import Any

import psycopg
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
from tickwheel.store.postgres.pool import session_options
from tickwheel.store.postgres.store import HOT_PLANNER, PostgresStore, Q

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


@pytest.mark.parametrize("fenced", [False, True])
async def test_a_prepared_generic_promotion_by_id_probes_only_its_ids(
    store: PostgresStore, pg_url: str, fenced: bool
) -> None:
    """The scheduler's promotion by id as its promotion sessions run it (store.py,
    ``PROMOTE_CONNECTIONS``): prepared, with a plan made once without seeing the batch's ids or
    shards. Among 3,000 due rows in six shards (a dense herd), each id is still one probe of the
    primary key (and one more for the update): no walk of the shards' due rows."""
    items = [
        replace(new_execution(execute_in=5, key=f"k{n}"), shard_id=n % 6) for n in range(3_000)
    ]
    await store.execution_insert_many(items)
    ids = sorted(i.execution_id for i in items)[::100]  # 30 of them, in every shard
    now = T0 + timedelta(seconds=5)
    params: dict[str, Any] = {"execution_ids": ids, "now": now, "shards": list(range(6))}
    query = Q["execution_promote_ids"]
    if fenced:
        leases = await store.shard_lease_acquire("s", 6, timedelta(seconds=30), T0)
        query = Q["execution_promote_ids_fenced"]
        epochs = [x.epoch for x in leases]
        params |= {"owner": "s", "epochs": epochs, "channel": "t", "payload": "", "direct": False}
    options = session_options(pg_url, HOT_PLANNER)
    async with await psycopg.AsyncConnection.connect(pg_url, options=options) as conn:
        cursor = await conn.execute(query, params, prepare=True)  # one transaction, rolled back
        moved = [r for r in await cursor.fetchall() if r[1 if fenced else 0] is not None]
        assert len(moved) == len(ids)
        cursor = await conn.execute(
            "SELECT c.relname, pg_stat_get_xact_tuples_returned(c.oid) FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'executions'::regclass"
            " AND pg_stat_get_xact_tuples_returned(c.oid) > 0"
        )
        read = dict(await cursor.fetchall())
        cursor = await conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
        )
        assert await cursor.fetchall() == [(1, 0)]
        await conn.rollback()
    assert set(read) == {"executions_pkey"} and read["executions_pkey"] <= 2 * len(ids), read
