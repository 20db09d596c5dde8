"""What the plan tests share (tests/store/test_plans_*.py, and the batch insert's key read): a
store on emptied tables, with or without the statistics of ``executions``, and the plan a
statement runs with, read back as JSON."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import psycopg

from tests.conftest import empty_pg_tables
from tickwheel.store.postgres.store import PostgresStore

LEASE = timedelta(seconds=30)
TABLES = "execution_events, attempts, executions, definitions, pauses, concurrency_holds"
CLAIM_PARAMS: dict[str, Any] = {
    "worker_id": "w0",
    "limit": 16,
    "lease": LEASE,
    "now": None,
    "definition_uris": None,
    "rate_ids": None,
    "walk": 0,  # the direct claim's first open shard (its walk starts there)
}
"""The parameters of every claim statement: a batch of 16 for any definition, now."""

_NO_STATISTICS = (
    # Autovacuum kept off the table until the test ends: it would analyze it under the test.
    "ALTER TABLE executions SET (autovacuum_enabled = false)",
    "DELETE FROM pg_statistic WHERE starelid = 'executions'::regclass",
)


async def run_sql(pg_url: str, *statements: str) -> None:
    """``statements`` one after the other on a connection of their own, each committed."""
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        for statement in statements:
            await conn.execute(statement)


@asynccontextmanager
async def emptied_store(pg_url: str, *, statistics: bool = True) -> AsyncIterator[PostgresStore]:
    """A store on emptied tables: what other test files left in the session's database is gone
    (a tenant's rate limit would hold rows back from a claim), and ``executions`` is a new, empty
    heap. Without ``statistics``, the planner has none for ``executions`` until the end. Emptied
    again at the end, statistics and autovacuum back, for the tests that run next."""
    store = await PostgresStore.open(pg_url, max_size=2, min_size=1)
    await store.migrate()
    with psycopg.connect(pg_url, autocommit=True) as sync:
        empty_pg_tables(sync)
    await run_sql(pg_url, f"TRUNCATE {TABLES} CASCADE", *(() if statistics else _NO_STATISTICS))
    try:
        yield store
    finally:
        await store.close()
        await run_sql(
            pg_url,
            "UPDATE shard_leases SET due_through = NULL",
            f"TRUNCATE {TABLES} CASCADE",
            "ALTER TABLE executions RESET (autovacuum_enabled)",
            "ANALYZE executions",
        )


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of an EXPLAIN (FORMAT JSON) plan."""
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


def executions_rows_read(plan: dict[str, Any]) -> int:
    """Rows the plan's scans of ``executions`` returned, over all their loops."""
    return sum(
        int(node["Actual Rows"]) * int(node["Actual Loops"])
        for node in plan_nodes(plan["Plan"])
        if node.get("Relation Name") == "executions" and "Scan" in node["Node Type"]
    )


async def explain(
    store: PostgresStore, sql: str, params: dict[str, Any], *, hot: bool = True
) -> dict[str, Any]:
    """The plan the store's claiming session runs ``sql`` with (or, not ``hot``, a session of
    its pool), executed and rolled back."""
    async with (store._hot if hot else store.pool).connection() as conn:
        await conn.execute("BEGIN")
        cursor = await conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params, prepare=False)
        row = await cursor.fetchone()
        await conn.execute("ROLLBACK")
    assert row is not None
    [plan] = next(iter(row.values()))
    return dict(plan)
