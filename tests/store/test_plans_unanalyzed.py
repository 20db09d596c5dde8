"""The drain's statements on a table that was never analyzed: a new database, or one whose
statistics are gone. The planner then prices ``status = 'READY'`` (or RUNNING) at half a percent
of the rows, and it once read every READY row per claim (a bitmap, then a sort) and every
RUNNING row per finished batch (a hash join): 3 to 14 ms a claim of 16 with 7,000 READY, and a
drain's database CPU per execution three times what it is with statistics (docs/scaling.md).
Each test fails on the code before that fix."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tests.factories import T0, new_execution
from tests.store.plan_helpers import CLAIM_PARAMS, LEASE, executions_rows_read, explain, run_sql
from tickwheel.domain.models import Execution
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.store.postgres.claims import CLAIM_DIRECT
from tickwheel.store.postgres.store import PostgresStore, Q
from tickwheel.store.protocol import AttemptResult

pytestmark = pytest.mark.postgres


async def test_a_claim_walks_the_ready_index_to_its_batch_without_statistics(
    unanalyzed: PostgresStore,
) -> None:
    for _ in range(3):
        await unanalyzed.execution_insert_many([new_execution() for _ in range(1_000)])
    for name in ("execution_claim_ready_unlimited", "execution_claim_ready"):
        plan = await explain(unanalyzed, Q[name], CLAIM_PARAMS)
        assert "Bitmap Heap Scan" not in json.dumps(plan), (name, plan)
        # The batch, the primary-key lookups of the update, and the tenants' probes.
        assert executions_rows_read(plan) <= 3 * 16 + 4, (name, plan)
    claimed = await unanalyzed.execution_claim_ready("w1", 16, LEASE)
    assert len(claimed) == 16


async def test_a_finished_batch_goes_by_primary_key_without_statistics(
    unanalyzed: PostgresStore,
) -> None:
    await unanalyzed.execution_insert_many([new_execution() for _ in range(3_000)])
    running: list[Execution] = []
    while len(running) < 3_000:
        running += await unanalyzed.execution_claim_ready("w1", 500, LEASE)
    done = running[:30]
    batch = [
        {
            "execution_id": str(e.execution_id),
            "fencing_token": e.fencing_token,
            "status": "SUCCEEDED",
            "attempt_status": "SUCCEEDED",
            "output": {},
            "output_reference": None,
            "error": None,
            "next_attempt_at": None,
            "lease_expired_only": False,
        }
        for e in done
    ]
    params = {
        "batch": json.dumps(batch),
        "now": None,
        "skip_prefix": None,
        "ready_channel": "tickwheel_test",
        "origin": "test",
    }
    # Any session, not only the claiming one: the statement itself leaves no other way.
    plan = await explain(unanalyzed, Q["execution_finish_many"], params, hot=False)
    assert executions_rows_read(plan) <= 2 * len(done), plan
    results = [
        AttemptResult(
            e.execution_id,
            e.fencing_token or 0,
            AttemptStatus.SUCCEEDED,
            ExecutionStatus.SUCCEEDED,
            output={},
            output_size=2,
        )
        for e in done
    ]
    assert await unanalyzed.attempt_finish_many(results) == [True] * len(done)


async def test_a_herds_direct_claim_probes_each_open_shard_in_a_new_database(
    unanalyzed: PostgresStore, pg_url: str
) -> None:
    """A worker started on a new database (``executions`` analyzed while empty), then a herd
    stored and its shards opened, as in B3. A generic plan of the direct claim made at the
    worker's start (``warm_claims``) scanned the whole due index for every open shard and
    filtered by shard (94,000 index entries for a claim of 63 in B3's herd, which drained at a
    fifth of its rate). Made at the herd, it probes each shard it walks."""
    await run_sql(pg_url, "ANALYZE executions")
    store = await PostgresStore.open(pg_url, max_size=2, claims=True)
    try:
        await store._hot.wait(timeout=10)  # warmed on the empty table
        herd = [replace(new_execution(execute_in=5), shard_id=i % 64) for i in range(3_200)]
        for start in range(0, len(herd), 1_000):
            await unanalyzed.execution_insert_many(herd[start : start + 1_000])
        leases = await store.shard_lease_acquire("s", SHARD_COUNT, timedelta(seconds=60), T0)
        due = T0 + timedelta(seconds=5)
        assert len(await store.shard_lease_open("s", leases, due, due)) == SHARD_COUNT
        for _ in range(14):  # psycopg prepares a statement at its fifth run (on each)
            assert len(await store.execution_claim_ready("w1", 16, LEASE, due)) == 16
        checked = 0
        for _ in range(2):  # each hot connection: the prepared direct claim's plan
            async with store._hot.connection() as conn:
                cursor = await conn.execute(
                    "SELECT name FROM pg_prepared_statements"
                    " WHERE statement LIKE '%direct AS MATERIALIZED%'"
                )
                for (name,) in [tuple(r.values()) for r in await cursor.fetchall()]:
                    plan = await _explain_prepared(conn, name, {**CLAIM_PARAMS, "now": due})
                    # The batch, the primary-key lookups of the update, the tenants' probes.
                    assert executions_rows_read(plan) <= 3 * 16 + 4, plan
                    checked += 1
        assert checked >= 1
    finally:
        await store.close()


async def _explain_prepared(conn: Any, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """EXPLAIN ANALYZE of the statement psycopg prepared as ``name`` (its parameters in the
    order psycopg numbers them: by first appearance), executed and rolled back."""
    order: list[str] = []
    for found in re.findall(r"%\((\w+)\)s", CLAIM_DIRECT):
        if found not in order:
            order.append(found)
    values = ", ".join(["%s"] * len(order))
    await conn.execute("BEGIN")
    cursor = psycopg.AsyncClientCursor(conn)
    await cursor.execute(
        f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {name} ({values})",
        [params[n] for n in order],
    )
    [row] = await cursor.fetchall()
    await conn.execute("ROLLBACK")
    [plan] = next(iter(row.values())) if isinstance(row, dict) else row[0]
    return dict(plan)
