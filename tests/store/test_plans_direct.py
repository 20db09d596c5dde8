"""The direct claim's walk of the open shards (execution_claim_ready_direct) under statistics
that make a scan of every SCHEDULED row look cheap: ``executions`` analyzed when it held almost
none (a system whose rows are mostly history), ``shard_leases`` analyzed while every shard was
open (a herd's instant; autovacuum analyzes the 1,024-row table every few renewals). On those
statistics the hot session's generic plan of the old statement, a join of the lease rows to
``executions``, put ``executions`` outside: it read every SCHEDULED row through an index
without a shard bound (``executions_tenant_status``, or ``executions_due`` from its first
entry; a backlog due next month among them) and probed each row's lease. Here it visited 381
rows for a batch of 8; over a backlog of millions, a claim reads it through. The walk now
drives from the open shards' ids through ``executions_due`` whatever the statistics, bounded by
their latest due_through."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from tests.factories import T0, new_execution
from tests.store.plan_helpers import (
    CLAIM_PARAMS,
    emptied_store,
    hot_prepared_plans,
    plan_nodes,
    rows_visited,
    run_sql,
)
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.store.postgres.claims import CLAIM_DIRECT
from tickwheel.store.postgres.store import PostgresStore

pytestmark = pytest.mark.postgres

BACKLOG = 3_000
DUE = 40


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PostgresStore]:
    async with emptied_store(pg_url) as store:
        # The statistics: 3,000 READY rows and no SCHEDULED one; every shard open.
        for _ in range(0, BACKLOG, 1_000):
            await store.execution_insert_many([new_execution() for _n in range(1_000)])
        leases = await store.shard_lease_acquire("s", SHARD_COUNT, timedelta(minutes=5))
        await store.shard_lease_open("s", leases, T0 + timedelta(days=1))
        await run_sql(pg_url, "ANALYZE executions", "ANALYZE shard_leases")
        # Then the rows: a backlog of another tenant due in a month (every shard), and a herd
        # due now; READY rows gone, so that the claim's batch comes from the walk of the shards.
        await run_sql(pg_url, "DELETE FROM executions")
        for _ in range(0, BACKLOG, 1_000):
            await store.execution_insert_many(
                [new_execution("aaa", execute_in=30 * 86_400) for _n in range(1_000)]
            )
        await store.execution_insert_many([new_execution(execute_in=60) for _ in range(DUE)])
        yield store


async def test_the_walk_of_the_open_shards_reads_only_due_rows_whatever_the_statistics(
    store: PostgresStore,
) -> None:
    # A claim that takes the walk of the shards (no place yet), prepared on a hot session.
    assert len(await store.execution_claim_ready("w", 8, CLAIM_PARAMS["lease"])) == 8
    params = {**CLAIM_PARAMS, "limit": 8, "walk": 0}
    plans = await hot_prepared_plans(store, "shard_id >= $", CLAIM_DIRECT, params)
    assert plans, "the direct claim was not prepared on a hot session"
    for plan in plans:
        indexes = {
            str(node["Index Name"])
            for node in plan_nodes(plan["Plan"])
            if str(node.get("Index Name", "")).startswith("executions_")
            and node.get("Relation Name") == "executions"
        }
        assert "executions_tenant_status" not in indexes, plan
        # The batch, its locks' and update's probes by primary key: not the backlog.
        assert rows_visited(plan, "executions") <= 8 * 8, plan
