"""The plan of a herd's grace check (``shard_lease_grace``, docs/scaling.md, "A herd's grace in one
statement"): one probe of ``executions_due`` per shard asked, reading only the shard's rows due
by the herd's opening, never a scan of the whole index or table, with or without the statistics
of ``executions``; and one lease row locked per shard it closes, in shard order."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tests.factories import T0, new_execution
from tests.store.plan_helpers import emptied_store, executions_rows_read, plan_nodes, run_sql
from tickwheel.domain.models import ShardLease
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.store.postgres.shard_leases import _grants
from tickwheel.store.postgres.store import PostgresStore, Q

pytestmark = pytest.mark.postgres

PER_SHARD = 8
DUE = T0 + timedelta(seconds=5)


@pytest.mark.parametrize("statistics", [True, False])
async def test_a_grace_probes_each_shard_of_the_herd(pg_url: str, statistics: bool) -> None:
    async with emptied_store(pg_url, statistics=statistics) as store:
        # Ids in shard order: the claims, by shard or in id order ("The direct claim in id
        # order"), empty whole shards.
        herd = [
            replace(new_execution(execute_in=5), shard_id=i // PER_SHARD)
            for i in range(PER_SHARD * SHARD_COUNT)
        ]
        later = [replace(new_execution(execute_in=9), shard_id=i) for i in range(SHARD_COUNT)]
        for start in range(0, len(herd), 1_000):
            await store.execution_insert_many(herd[start : start + 1_000])
        await store.execution_insert_many(later)
        if statistics:
            await run_sql(pg_url, "ANALYZE executions")
        leases = await store.shard_lease_acquire("s", SHARD_COUNT, timedelta(seconds=60), T0)
        await store.shard_lease_open("s", leases, DUE, DUE)
        # The claims take half of the shards' rows.
        taken = 0
        while taken < len(herd) // 2:
            taken += len(await store.execution_claim_ready("w", 512, timedelta(seconds=30), DUE))
        assert taken == len(herd) // 2
        plan = await _explained(store, leases[::-1], None)
        nodes = list(plan_nodes(plan["Plan"]))
        scans = [n for n in nodes if n.get("Relation Name") == "executions"]
        probes = [n for n in nodes if n.get("Index Name", "").startswith("executions")]
        # One probe of the due index per shard (an index scan, or a bitmap of it on a small
        # table), each returning that shard's rows still due.
        assert {n["Index Name"] for n in probes} == {"executions_due"}, plan
        assert {n["Actual Loops"] for n in [*scans, *probes]} == {SHARD_COUNT}, plan
        assert executions_rows_read(plan) == len(herd) // 2, plan
        # No scan of executions (the lease table's 1,024 rows may be read whole for the close).
        assert not [n for n in scans if n["Node Type"] == "Seq Scan"], plan
        # The lease rows: one locked per emptied shard (half of them), and those updated.
        locks = [n for n in plan_nodes(plan["Plan"]) if n["Node Type"] == "LockRows"]
        assert [(n["Actual Rows"], n["Actual Loops"]) for n in locks] == [(1, SHARD_COUNT // 2)]
        left, closed = await store.shard_lease_grace("s", leases, DUE, DUE)
        assert left == len(herd) // 2
        assert len(closed) == SHARD_COUNT // 2  # those the claims emptied (their walk's half)
        # Only a sample counted whole (the scheduler's, engine/herds.py): the other shards are
        # probed for one row, so the statement reads the sample's rows and one row per other
        # shard not emptied, not every row left (fails on the statement that counted all).
        full = [lease for lease in leases if lease.shard_id not in closed]
        sample = {lease.shard_id for lease in full[:16]}
        plan = await _explained(store, full, sample)
        # (EXPLAIN gives rows per loop rounded: 1.2 here, 8 when every shard is counted.)
        assert executions_rows_read(plan) < 2 * len(full) < len(herd) // 2, plan
        assert await store.shard_lease_grace("s", full, DUE, DUE, counted=sample) == (
            16 * PER_SHARD + len(full) - 16,
            [],
        )


async def _explained(
    store: PostgresStore, leases: list[ShardLease], counted: set[int] | None
) -> dict[str, Any]:
    """The grace check's plan as it ran (rolled back), ``counted`` as the store sends it."""
    params = {
        **_grants("s", leases, DUE),
        "through": DUE,
        "counted": [counted is None or lease.shard_id in counted for lease in leases],
    }
    async with store.pool.connection() as conn:
        await conn.execute("BEGIN")
        explain = "EXPLAIN (ANALYZE, FORMAT JSON) " + Q["shard_lease_grace"]
        cursor = await conn.execute(explain, params)
        row = await cursor.fetchone()
        await conn.execute("ROLLBACK")
    assert row is not None
    [plan] = next(iter(row.values()))
    return dict(plan)
