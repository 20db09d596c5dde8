"""The drain's statements on a table that was never analyzed: a new database, or one whose
statistics are gone. The planner then prices ``status = 'READY'`` (or RUNNING) at half a percent
of the rows, and it once read every READY row per claim (a bitmap, then a sort) and every
RUNNING row per finished batch (a hash join): 3 to 14 ms a claim of 16 with 7,000 READY, and a
drain's database CPU per execution three times what it is with statistics (docs/scaling.md).
Each test fails on the code before that fix."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tests.conftest import empty_pg_tables
from tests.factories import new_execution
from tickwheel.domain.models import Execution
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.store.postgres.store import PostgresStore, Q
from tickwheel.store.protocol import AttemptResult

pytestmark = pytest.mark.postgres

LEASE = timedelta(seconds=30)
_TABLES = "execution_events, attempts, executions, definitions, pauses, concurrency_holds"


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PostgresStore]:
    """A store on an emptied ``executions`` without statistics, and autovacuum kept off it
    until the test ends (it would analyze the table under the test)."""
    store = await PostgresStore.open(pg_url, max_size=2, min_size=1)
    await store.migrate()
    with psycopg.connect(pg_url, autocommit=True) as sync:
        # What other test files left in this database too (a tenant's rate limit holds its rows
        # back from these claims), as the shared store fixture does.
        empty_pg_tables(sync)
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute(f"TRUNCATE {_TABLES} CASCADE")
        await conn.execute("ALTER TABLE executions SET (autovacuum_enabled = false)")
        await conn.execute("DELETE FROM pg_statistic WHERE starelid = 'executions'::regclass")
    try:
        yield store
    finally:
        await store.close()
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            await conn.execute("ALTER TABLE executions RESET (autovacuum_enabled)")
            # Statistics again for the tests that run next on this database.
            await conn.execute("ANALYZE executions")


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def _executions_rows_read(plan: dict[str, Any]) -> int:
    """Rows the plan's scans of ``executions`` returned, over all their loops."""
    return sum(
        int(node["Actual Rows"]) * int(node["Actual Loops"])
        for node in _nodes(plan["Plan"])
        if node.get("Relation Name") == "executions" and "Scan" in node["Node Type"]
    )


async def _explain(store: PostgresStore, sql: str, params: dict[str, Any]) -> dict[str, Any]:
    """The plan the store's claiming session runs ``sql`` with, executed and rolled back."""
    async with store._hot.connection() as conn:
        await conn.execute("BEGIN")
        cursor = await conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params, prepare=False)
        row = await cursor.fetchone()
        await conn.execute("ROLLBACK")
    assert row is not None
    [plan] = next(iter(row.values()))
    return dict(plan)


async def test_a_claim_walks_the_ready_index_to_its_batch_without_statistics(
    store: PostgresStore,
) -> None:
    for _ in range(3):
        await store.execution_insert_many([new_execution() for _ in range(1_000)])
    params = {
        "worker_id": "w0",
        "limit": 16,
        "lease": LEASE,
        "now": None,
        "definition_uris": None,
        "rate_ids": None,
    }
    for name in ("execution_claim_ready_unlimited", "execution_claim_ready"):
        plan = await _explain(store, Q[name], params)
        assert "Bitmap Heap Scan" not in json.dumps(plan), (name, plan)
        # The batch, the primary-key lookups of the update, and the tenants' probes.
        assert _executions_rows_read(plan) <= 3 * 16 + 4, (name, plan)
    claimed = await store.execution_claim_ready("w1", 16, LEASE)
    assert len(claimed) == 16


async def test_a_finished_batch_goes_by_primary_key_without_statistics(
    store: PostgresStore,
) -> None:
    await store.execution_insert_many([new_execution() for _ in range(3_000)])
    running: list[Execution] = []
    while len(running) < 3_000:
        running += await store.execution_claim_ready("w1", 500, LEASE)
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
    async with store.pool.connection() as conn:
        await conn.execute("BEGIN")
        cursor = await conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + Q["execution_finish_many"], params, prepare=False
        )
        row = await cursor.fetchone()
        await conn.execute("ROLLBACK")
    assert row is not None
    [plan] = next(iter(row.values()))
    assert _executions_rows_read(plan) <= 2 * len(done), plan
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
    assert await store.attempt_finish_many(results) == [True] * len(done)
