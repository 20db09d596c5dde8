"""Monthly partitioning of executions on PostgreSQL (docs/scaling.md): converting a populated
table keeps every row and every query working (and the plans on the partial indexes), the
conversion refuses what it cannot carry over, and ``ensure`` makes the right months and is
idempotent. Dropping months and the CLI: test_partitions_drop.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tests.store.partition_helpers import (
    DAY,
    LEASE,
    NOW,
    Fresh,
    finished,
    fresh,
    names,
    new_at,
    scheduled,
)
from tickwheel.domain.models import ExecutionFilter
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.engine.pruner import prune
from tickwheel.store.due import DueSlice
from tickwheel.store.postgres.partitions import (
    PartitioningError,
    PartitioningUnsupported,
    partitions_for,
    uuid7_floor,
)
from tickwheel.store.postgres.promotion import due_slices_json
from tickwheel.store.postgres.store import PostgresStore, Q
from tickwheel.store.protocol import AttemptResult
from tickwheel.store.sqlite.store import SqliteStore

pytestmark = pytest.mark.postgres
__all__ = ["fresh"]  # the fixture, imported so that pytest finds it here

# -- enable ---------------------------------------------------------------------------------------


async def test_enable_on_a_populated_table_keeps_every_row_and_every_query(fresh: Fresh) -> None:
    store = fresh.store
    done = await finished(store, NOW - 60 * DAY, NOW - 59 * DAY, key="done")
    cancelled = await scheduled(store, NOW - 30 * DAY, "cancel-me", 10)
    assert await store.execution_cancel("acme", cancelled.execution_id, NOW - 29 * DAY)
    future = await scheduled(store, NOW - 1 * DAY, "far-future", 200)
    due = await scheduled(store, NOW - 2 * DAY, "due", 1)
    before = {
        e.execution_id: e for e in await store.execution_list("acme", ExecutionFilter(), None, 100)
    }
    attempts_before = await store.attempt_list("acme", done.execution_id)
    events_before = await store.execution_event_list("acme", cancelled.execution_id)

    report = await fresh.parts.enable(NOW, ahead=2)

    assert report.rows == 4
    assert await fresh.parts.layout() == "partitioned"
    listed = await fresh.parts.list_partitions()
    assert names(listed) == [
        "executions_p202609",
        "executions_p202610",
        "executions_p202611",
        "executions_p202612",
        "executions_p202701",
        "executions_default",
    ]
    assert listed[0].start == datetime(2026, 9, 1, tzinfo=UTC)
    assert listed[0].end == datetime(2026, 10, 1, tzinfo=UTC)
    # Each row sits in the month of its id; none in the default partition.
    assert fresh.scalar("SELECT count(*) FROM executions_default") == 0
    assert fresh.scalar("SELECT count(*) FROM executions_p202609") == 1
    # Reads: every row, attempt, history event and output as before.
    after = await store.execution_list("acme", ExecutionFilter(), None, 100)
    assert {e.execution_id: e for e in after} == before
    assert await store.attempt_list("acme", done.execution_id) == attempts_before
    assert await store.execution_event_list("acme", cancelled.execution_id) == events_before
    assert await store.execution_output_get("acme", done.execution_id) == {"greeting": "hi"}
    # The indexes kept their names, now on the partitioned table.
    indexes = fresh.scalar(
        "SELECT array_agg(indexname::text ORDER BY indexname) FROM pg_indexes"
        " WHERE tablename = 'executions'"
    )
    assert indexes == [
        "executions_concurrency_queue",
        "executions_deadline",
        "executions_due",
        "executions_finished",
        "executions_idempotency_key",
        "executions_pkey",
        "executions_ready_tenant",
        "executions_retry_due",
        "executions_running_lease",
        "executions_start_by",
        "executions_tenant_definition",
        "executions_tenant_status",
    ]

    # Idempotent re-submission: the same key gives back the same execution, whatever month the
    # new attempt's id would have gone to.
    [again] = await store.execution_insert_many([new_at(now=NOW, key="far-future")])
    assert not again.created and again.execution.execution_id == future.execution_id
    # Two items with one key in one batch: one row.
    first, second = await store.execution_insert_many(
        [new_at(now=NOW, key="twice"), new_at(now=NOW, key="twice")]
    )
    assert first.created and not second.created
    assert second.execution.execution_id == first.execution.execution_id
    # Submit, promote, claim, finish.
    fresh_item = new_at(now=NOW, key="new")
    [created] = await store.execution_insert_many([fresh_item])
    assert created.created
    await store.execution_promote_due(range(1024), 100, NOW)
    promoted = await store.execution_get("acme", due.execution_id)
    assert promoted is not None and promoted.status is ExecutionStatus.READY
    still = await store.execution_get("acme", future.execution_id)
    assert still is not None and still.status is ExecutionStatus.SCHEDULED
    claimed = await store.execution_claim_ready("w2", 10, LEASE, NOW)
    assert {c.execution_id for c in claimed} == {
        due.execution_id,
        fresh_item.execution_id,
        first.execution.execution_id,
    }
    for c in claimed:
        assert c.fencing_token is not None
        ok = AttemptResult(
            c.execution_id, c.fencing_token, AttemptStatus.SUCCEEDED, ExecutionStatus.SUCCEEDED
        )
        assert await store.attempt_finish(ok, NOW)
    statuses = await store.execution_count_by_status()
    assert statuses[ExecutionStatus.SUCCEEDED] == 4
    assert statuses[ExecutionStatus.SCHEDULED] == 1

    # Prune: the old finished rows go with their attempts, history, outputs and keys.
    assert await prune(store, NOW - 20 * DAY, batch=1) == 2
    assert await store.execution_get("acme", done.execution_id) is None
    assert fresh.rows_of("attempts", [done.execution_id]) == 0
    assert fresh.rows_of("execution_outputs", [done.execution_id]) == 0
    assert fresh.rows_of("execution_events", [cancelled.execution_id]) == 0
    assert fresh.scalar("SELECT count(*) FROM execution_keys WHERE idempotency_key = 'done'") == 0
    # ... and their keys are free again, as under the unique constraint.
    [reused] = await store.execution_insert_many([new_at(now=NOW, key="done")])
    assert reused.created and reused.execution.execution_id != done.execution_id


# The claim a store makes while no execution with a concurrency limit is in sight. The claim
# that applies limits is planned per call; on these 30 READY rows a sort of all of them is its
# cheapest plan (with the pause and limit filters priced in), so its plan over a real backlog is
# checked in test_postgres_specific.py instead.
CLAIMS = ("execution_claim_ready_unlimited",)


def _scans(
    node: dict[str, Any], *, gates: bool = True
) -> Iterator[tuple[str, str | None, str | None]]:
    """(node type, index, relation) of every scan in an EXPLAIN (FORMAT JSON) plan; without
    ``gates``, leaving out subplans (in the claim: its concurrency gate, which only an execution
    with a concurrency limit enters; an unlimited claim never runs them)."""
    if "Scan" in node["Node Type"]:
        yield node["Node Type"], node.get("Index Name"), node.get("Relation Name")
    for child in node.get("Plans", []):
        if gates or child.get("Parent Relationship") != "SubPlan":
            yield from _scans(child, gates=gates)


async def test_claims_and_the_due_walk_still_read_only_the_partial_indexes(
    fresh: Fresh,
) -> None:
    """On the partitioned table each partition has its own due and READY partial indexes: a
    claim and a window load read those, per partition, never a SCHEDULED row they do not need."""
    store = fresh.store
    for month in (9, 10, 11):
        created = datetime(2026, month, 2, tzinfo=UTC)
        for start in range(0, 3000, 1000):
            future = [
                new_at(now=created, execute_in=86_400 * 100 + n) for n in range(start, start + 1000)
            ]
            await store.execution_insert_many(future)
        await store.execution_insert_many([new_at(now=created, priority=n % 3) for n in range(10)])
    await fresh.parts.enable(NOW, ahead=0)
    with psycopg.connect(fresh.url, autocommit=True) as conn:
        conn.execute("ANALYZE executions")

        def children(index: str) -> set[str]:
            rows = conn.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                " WHERE i.inhparent = %s::regclass",
                (index,),
            ).fetchall()
            return {r[0] for r in rows}

        def plan(query: str, params: dict[str, Any]) -> dict[str, Any]:
            [(found,)] = conn.execute("EXPLAIN (FORMAT JSON) " + Q[query], params).fetchall()
            return dict(found[0]["Plan"])

        ready = children("executions_ready_tenant")
        assert len(ready) == 4  # September to November (NOW is in November), the default
        for query in CLAIMS:
            claim = plan(
                query,
                {
                    "worker_id": "w",
                    "limit": 10,
                    "lease": LEASE,
                    "now": None,
                    "definition_uris": None,
                    "rate_ids": None,
                },
            )
            [candidates] = [p for p in claim["Plans"] if p.get("Subplan Name") == "CTE candidates"]
            # Besides the READY indexes, the pause and rate-limit clauses probe their (small)
            # tables, and the READY tenant is read from the statement's spread (a CTE).
            scans = {
                s
                for s in _scans(candidates, gates=False)
                if s[2] not in ("pauses", "rate_limits") and s[0] != "CTE Scan"
            }
            assert scans and {kind for kind, *_ in scans} <= {"Index Scan", "Index Only Scan"}, (
                query,
                claim,
            )
            assert {index for _, index, _ in scans} <= ready, (query, claim)
            # Already in claim order: a merge of the ordered per-partition indexes, no sort.
            assert '"Node Type": "Sort"' not in json.dumps(candidates), (query, claim)

        until = NOW + timedelta(seconds=30)
        window = plan(
            "execution_due_window",
            {"slices": due_slices_json([DueSlice(7, NOW, until)]), "limit": 500},
        )
        due = children("executions_due")
        # The empty default partition may be read whole: an empty heap costs nothing.
        scans = {
            s for s in _scans(window) if s[0] != "Function Scan" and s[2] != "executions_default"
        }
        assert scans and {kind for kind, *_ in scans} <= {"Index Scan", "Index Only Scan"}, window
        assert {index for _, index, _ in scans} <= due, window


async def test_enable_is_all_or_nothing_and_only_once(fresh: Fresh) -> None:
    await scheduled(fresh.store, NOW, "a", 1)
    with pytest.raises(PartitioningError, match="--ahead must be 0 or more"):
        await fresh.parts.enable(NOW, ahead=-1)
    await fresh.parts.enable(NOW, ahead=0)
    with pytest.raises(PartitioningError, match="already partitioned"):
        await fresh.parts.enable(NOW)
    assert names(await fresh.parts.list_partitions()) == [
        "executions_p202611",
        "executions_default",
    ]


async def test_enable_refuses_while_workers_or_schedulers_run_unless_forced(fresh: Fresh) -> None:
    store = fresh.store
    await store.worker_heartbeat("w-busy", "host", 1, 4, 0, NOW - timedelta(seconds=5))
    with pytest.raises(PartitioningError, match="worker w-busy"):
        await fresh.parts.enable(NOW)
    assert await fresh.parts.layout() == "plain"
    await fresh.parts.enable(NOW, force=True)
    assert await fresh.parts.layout() == "partitioned"


async def test_enable_refuses_a_foreign_key_it_does_not_know_and_changes_nothing(
    fresh: Fresh,
) -> None:
    kept = await scheduled(fresh.store, NOW, "kept", 1)
    with psycopg.connect(fresh.url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE audit_notes (execution_id uuid REFERENCES executions (execution_id))"
        )
    with pytest.raises(PartitioningError, match="audit_notes references executions"):
        await fresh.parts.enable(NOW)
    assert await fresh.parts.layout() == "plain"
    made = (
        "SELECT count(*) FROM pg_class"
        " WHERE relname ~ '^(executions_(p[0-9]{6}|default|partitioned)|execution_keys)$'"
    )
    assert fresh.scalar(made) == 0
    assert await fresh.store.execution_get("acme", kept.execution_id) == kept


async def test_concurrent_submissions_of_one_key_make_one_execution(fresh: Fresh) -> None:
    """The key's uniqueness moved to execution_keys: two transactions racing on a key still
    make one execution, and both are told which."""
    await fresh.parts.enable(NOW, ahead=0)
    other = await PostgresStore.open(fresh.url, max_size=2)
    try:
        for round_ in range(20):
            key = f"race-{round_}"
            a, b = await asyncio.gather(
                fresh.store.execution_insert_many([new_at(now=NOW, key=key)]),
                other.execution_insert_many([new_at(now=NOW, key=key)]),
            )
            assert sorted([a[0].created, b[0].created]) == [False, True]
            assert a[0].execution.execution_id == b[0].execution.execution_id
    finally:
        await other.close()
    assert fresh.scalar("SELECT count(*) FROM executions") == 20
    assert fresh.scalar("SELECT count(*) FROM execution_keys") == 20


async def test_commands_other_than_enable_need_a_partitioned_table(fresh: Fresh) -> None:
    for call in (
        fresh.parts.list_partitions(),
        fresh.parts.ensure(NOW),
        fresh.parts.drop(NOW, 90 * DAY),
    ):
        with pytest.raises(PartitioningError, match=r"not partitioned.*partitions enable"):
            await call


async def test_sqlite_is_refused_with_the_reason() -> None:
    store = await SqliteStore.open(":memory:")
    try:
        with pytest.raises(PartitioningUnsupported, match="partitioning is a PostgreSQL option"):
            partitions_for(store)
    finally:
        await store.close()


# -- ensure ---------------------------------------------------------------------------------------


async def test_ensure_creates_the_months_ahead_and_is_idempotent(fresh: Fresh) -> None:
    await fresh.parts.enable(NOW, ahead=0)
    report = await fresh.parts.ensure(NOW, ahead=3)
    assert report.created == ["executions_p202612", "executions_p202701", "executions_p202702"]
    assert report.existing == ["executions_p202611"]
    again = await fresh.parts.ensure(NOW, ahead=3)
    assert again.created == [] and len(again.existing) == 4
    # The bounds are the months' first UUIDv7s: an id of the last millisecond of January is in
    # January's partition, one of the first of February in February's.
    listed = {p.name: p for p in await fresh.parts.list_partitions()}
    assert listed["executions_p202701"].end == datetime(2027, 2, 1, tzinfo=UTC)
    last_ms = datetime(2027, 2, 1, tzinfo=UTC) - timedelta(milliseconds=1)
    for at, partition in (
        (last_ms, "executions_p202701"),
        (last_ms + timedelta(milliseconds=1), "executions_p202702"),
    ):
        [o] = await fresh.store.execution_insert_many([new_at(now=at)])
        where = fresh.scalar(
            "SELECT tableoid::regclass::text FROM executions WHERE execution_id = %s",
            o.execution.execution_id,
        )
        assert where == partition
    assert uuid7_floor(datetime(2027, 2, 1, tzinfo=UTC)) < o.execution.execution_id


async def test_ensure_skips_a_month_the_default_partition_already_holds(fresh: Fresh) -> None:
    await fresh.parts.enable(NOW, ahead=0)
    late = datetime(2027, 3, 10, tzinfo=UTC)
    [o] = await fresh.store.execution_insert_many([new_at(now=late, key="late")])
    assert fresh.scalar("SELECT count(*) FROM executions_default") == 1
    report = await fresh.parts.ensure(late, ahead=1)
    assert report.skipped == {
        "executions_p202703": "executions_default holds executions of that month"
    }
    assert report.created == ["executions_p202704"]
    assert await fresh.store.execution_get("acme", o.execution.execution_id) == o.execution
