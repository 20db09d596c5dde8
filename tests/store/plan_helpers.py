"""What the plan tests share (tests/store/test_plans_*.py, and the batch insert's key read): a
store on emptied tables, with or without the statistics of ``executions``, and the plan a
statement runs with, read back as JSON."""

from __future__ import annotations

import re
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


def rows_visited(plan: dict[str, Any], table: str) -> int:
    """Rows the plan's scans of ``table`` and of its indexes visited over all their loops: the
    rows they returned and those their filters removed (an index walked to find a few rows
    returns few and removes many), and the entries a bitmap of one of its indexes collected.
    The indexes are known by their names' prefix (``executions_running_lease``)."""
    return sum(
        (
            int(node["Actual Rows"])
            + int(node.get("Rows Removed by Filter", 0))
            + int(node.get("Rows Removed by Index Recheck", 0))
        )
        * int(node["Actual Loops"])
        for node in plan_nodes(plan["Plan"])
        if "Scan" in node["Node Type"]
        and (
            node.get("Relation Name") == table
            or str(node.get("Index Name", "")).startswith(f"{table}_")
        )
    )


async def explain_prepared(
    conn: Any, name: str, sql: str, params: dict[str, Any]
) -> dict[str, Any]:
    """EXPLAIN ANALYZE of the statement ``sql`` that psycopg prepared on ``conn`` as ``name``,
    with ``params`` (in the order psycopg numbers them: by first appearance), executed and
    rolled back. The plan is the one the session keeps for it, generic or custom. psycopg
    forgets its prepared statements at a ROLLBACK: call it last for each statement."""
    order: list[str] = []
    for found in re.findall(r"%\((\w+)\)s", sql):
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


async def hot_prepared_plans(
    store: PostgresStore, fragment: str, sql: str, params: dict[str, Any]
) -> list[dict[str, Any]]:
    """The plans each of ``store``'s two hot connections keeps for ``sql`` (prepared by psycopg,
    found by ``fragment`` of its text), run with ``params`` (``explain_prepared``)."""
    plans: list[dict[str, Any]] = []
    for _ in range(2):  # the pool lends each of its two connections in turn
        async with store._hot.connection() as conn:
            for name in await prepared_names(conn, fragment):
                plans.append(await explain_prepared(conn, name, sql, params))
    return plans


async def prepared_names(conn: Any, fragment: str) -> list[str]:
    """The statements prepared on ``conn`` whose text holds ``fragment``."""
    cursor = await conn.execute(
        "SELECT name FROM pg_prepared_statements WHERE strpos(statement, %s) > 0", [fragment]
    )
    rows = await cursor.fetchall()
    return [str(next(iter(r.values())) if isinstance(r, dict) else r[0]) for r in rows]


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
