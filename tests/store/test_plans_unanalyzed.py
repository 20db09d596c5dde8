"""The drain's statements on a table that was never analyzed: a new database, or one whose
statistics are gone. The planner then prices ``status = 'READY'`` (or RUNNING) at half a percent
of the rows, and it once read every READY row per claim (a bitmap, then a sort) and every
RUNNING row per finished batch (a hash join): 3 to 14 ms a claim of 16 with 7,000 READY, and a
drain's database CPU per execution three times what it is with statistics (docs/scaling.md).
Each test fails on the code before that fix."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.factories import T0, new_execution
from tests.store.plan_helpers import (
    CLAIM_PARAMS,
    LEASE,
    executions_rows_read,
    explain,
    explain_prepared,
    hot_prepared_plans,
    prepared_names,
    rows_visited,
    run_sql,
)
from tickwheel.domain.models import Execution
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.store.postgres.claims import CLAIM_DIRECT, CLAIM_ORDERED, FINISH_MANY
from tickwheel.store.postgres.store import PostgresStore, Q
from tickwheel.store.protocol import AttemptResult
from tickwheel.store.workflow_keys import WORKFLOW_KEY_PREFIX

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
    params = _finish_params(done, skip_prefix=None)
    # Any session, not only the claiming one: the statement itself leaves no other way.
    plan = await explain(unanalyzed, Q["execution_finish_many"], params, hot=False)
    assert executions_rows_read(plan) <= 2 * len(done), plan
    results = [_succeeded(e) for e in done]
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
        # The herd's first id not taken yet: the ordered walk's place.
        after = min(i.execution_id for i in herd if i.execution_id.int > store._order.after.int)
        params = {**CLAIM_PARAMS, "now": due, "tenant": "acme", "after": after}
        plans = await hot_prepared_plans(store, "shard_id >= $", CLAIM_DIRECT, params)
        assert plans  # the prepared direct claim (its first run seeded the ordered walk)
        for plan in plans:
            # The batch, the primary-key lookups of the update, the tenants' probes.
            assert executions_rows_read(plan) <= 3 * 16 + 4, plan
        # The ordered walk (docs/scaling.md, "The direct claim in id order"): its walk of the
        # tenant's SCHEDULED rows in id order, bounded by four times the batch, then the
        # batch by primary key and the update's lookups.
        plans = await hot_prepared_plans(store, "walked AS MATERIALIZED", CLAIM_ORDERED, params)
        assert plans
        for plan in plans:
            assert "executions_tenant_status" in json.dumps(plan), plan
            assert executions_rows_read(plan) <= 4 * 16 + 3 * 16 + 4, plan
    finally:
        await store.close()


async def test_a_worker_started_on_a_new_database_finishes_by_primary_key(
    unanalyzed: PostgresStore, pg_url: str
) -> None:
    """A worker started on a new database: ``warm_claims`` prepares the finish on an empty
    ``executions`` never analyzed, and its hot sessions keep that generic plan until the table
    is next analyzed. The plan walked ``executions_running_lease`` to find the batch, every
    RUNNING row and its heap tuple: 2,000 rows visited for a batch of 16 (and so did a plan
    made on these 3,000 rows, never analyzed)."""
    for plan in await _finish_plans_of_a_worker_started_now(unanalyzed, pg_url, 3_000):
        # The batch by primary key, and the attempts' update by theirs.
        assert rows_visited(plan, "executions") <= 2 * 16, plan


async def test_a_worker_started_on_emptied_attempts_finishes_them_by_primary_key(
    unanalyzed: PostgresStore, pg_url: str
) -> None:
    """A worker started while ``attempts`` is empty and analyzed so (its rows pruned, then
    vacuumed: the statistics say "no rows", not "unknown"): its hot sessions' finish, planned at
    their start and kept, walked the whole primary key of ``attempts`` for every batch (the only
    way left with no sequential scan), every attempt ever made for 16: in B4, after a vacuum of
    the reused database, a finish took 0.6-1.6 s and the drain fell to a tenth. The batch's ids
    bound the walk now, whatever the plan."""
    await run_sql(pg_url, "ANALYZE attempts")
    for plan in await _finish_plans_of_a_worker_started_now(unanalyzed, pg_url, 2_000):
        # The batch's attempts by their key: not every attempt row (2,000).
        assert rows_visited(plan, "attempts") <= 2 * 16, plan


async def _finish_plans_of_a_worker_started_now(
    unanalyzed: PostgresStore, pg_url: str, rows: int
) -> list[dict[str, Any]]:
    """A worker's store opened on the tables as they are (its finish prepared there, on each
    hot connection), then ``rows`` executions stored and 2,000 claimed; a batch of 16 finished
    by the worker, and its prepared finish's plan for the next 16, one per hot connection."""
    store = await PostgresStore.open(pg_url, max_size=2, claims=True)
    try:
        await store._hot.wait(timeout=10)  # warmed on the tables as they are
        for _ in range(rows // 1_000):
            await unanalyzed.execution_insert_many([new_execution() for _ in range(1_000)])
        running: list[Execution] = []
        while len(running) < 2_000:
            running += await unanalyzed.execution_claim_ready("w1", 500, LEASE)
        # The worker's own finish, on the statement prepared at its start.
        done = running[:16]
        assert await store.attempt_finish_many([_succeeded(e) for e in done]) == [True] * 16
        params = _finish_params(running[16:32], skip_prefix=WORKFLOW_KEY_PREFIX)
        plans = await hot_prepared_plans(store, "WITH finished AS", FINISH_MANY, params)
        assert plans  # each hot connection's prepared finish
        return plans
    finally:
        await store.close()


async def test_the_reapers_batch_goes_by_primary_key_on_a_new_table(
    unanalyzed: PostgresStore, pg_url: str
) -> None:
    """The reaper's batch runs on the main pool, whose sessions plan a prepared statement for
    its parameters five times and then keep the generic plan if it looks no dearer: it did for
    this one (three generic plans in eight runs, checked by hand). On these 3,000 rows, never
    analyzed, that plan read the batch through a bitmap of ``executions_running_lease``: every
    RUNNING row (2,000) for a batch of 16."""
    for _ in range(3):
        await unanalyzed.execution_insert_many([new_execution() for _ in range(1_000)])
    running: list[Execution] = []
    while len(running) < 2_000:
        running += await unanalyzed.execution_claim_ready("w1", 500, LEASE, T0)
    later = T0 + timedelta(hours=1)  # every lease expired

    def reap(batch: list[Execution]) -> dict[str, Any]:
        return {
            "execution_ids": [e.execution_id for e in batch],
            "fencing_tokens": [e.fencing_token for e in batch],
            "statuses": ["RETRY_WAIT"] * len(batch),
            "errors": [Jsonb({"kind": "lost"})] * len(batch),
            "next_attempt_ats": [later] * len(batch),
            "now": later,
        }

    sql = Q["execution_reap_batch"]
    options = "-c plan_cache_mode=force_generic_plan"
    async with await psycopg.AsyncConnection.connect(
        pg_url, autocommit=True, options=options
    ) as conn:
        cursor = await conn.execute(sql, reap(running[:16]), prepare=True)
        assert len(await cursor.fetchall()) == 16
        [name] = await prepared_names(conn, "AS b (execution_id, fencing_token, status")
        plan = await explain_prepared(conn, name, sql, reap(running[16:32]))
    # The batch by primary key: no walk of the RUNNING rows.
    assert rows_visited(plan, "executions") <= 3 * 16, plan


def _succeeded(e: Execution) -> AttemptResult:
    return AttemptResult(
        e.execution_id,
        e.fencing_token or 0,
        AttemptStatus.SUCCEEDED,
        ExecutionStatus.SUCCEEDED,
        output={},
        output_size=2,
    )


def _finish_params(done: list[Execution], *, skip_prefix: str | None) -> dict[str, Any]:
    """``execution_finish_many``'s parameters for ``done``, each SUCCEEDED."""
    batch: list[dict[str, Any]] = [
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
    return {
        "batch": json.dumps(batch),
        "now": None,
        "skip_prefix": skip_prefix,
        "ready_channel": "tickwheel_test",
        "origin": "test",
    }
