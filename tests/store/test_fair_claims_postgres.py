"""The fair claim's plan on PostgreSQL (docs/flow-control.md, "Fair claiming"): a paused
tenant's backlog is skipped whole, not probed row by row on every claim."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tests.conftest import empty_pg_tables
from tests.factories import T0, new_execution
from tickwheel.store.postgres.store import PostgresStore, Q

pytestmark = pytest.mark.postgres
LEASE = timedelta(seconds=30)


@pytest.fixture
async def pg(pg_url: str) -> AsyncIterator[PostgresStore]:
    store = await PostgresStore.open(pg_url, max_size=1, min_size=1)
    try:
        await store.migrate()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            empty_pg_tables(conn)
        yield store
    finally:
        await store.close()


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


async def test_a_paused_tenants_backlog_is_not_walked_by_the_fair_claim(
    pg: PostgresStore, pg_url: str
) -> None:
    for _ in range(2):
        await pg.execution_insert_many([new_execution("held") for _n in range(2_000)])
    await pg.execution_insert_many([new_execution("b") for _ in range(3)])
    await pg.pause_set("held", "", "maintenance", T0)
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute("ANALYZE executions")
        await conn.execute("BEGIN")
        cursor = await conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + Q["execution_claim_ready"],
            {
                "worker_id": "w0",
                "limit": 10,
                "lease": LEASE,
                "now": None,
                "definition_uris": None,
                "rate_ids": None,
            },
            prepare=False,
        )
        [(plan,)] = await cursor.fetchall()
        await conn.execute("ROLLBACK")
    # Rows read: those the scan returned and those its filter (the per-row pause probe) removed.
    walked = sum(
        (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        for node in _nodes(plan[0]["Plan"])
        if node.get("Index Name") == "executions_ready_tenant" and node["Node Type"] == "Index Scan"
    )
    assert walked == 3, plan
    claimed = await pg.execution_claim_ready("w0", 10, LEASE, T0 + timedelta(seconds=1))
    assert [e.tenant for e in claimed] == ["b"] * 3
