"""PostgreSQL-only behaviour: races between real, parallel connections, and the query plans the
design depends on. The conformance suite (the rest of tests/store) covers the semantics."""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import _queries

from tests.conftest import PG_ADMIN_URL
from tests.factories import T0, definition, new_execution
from tests.store.plan_helpers import CLAIM_PARAMS, plan_nodes
from tickwheel.domain.concurrency import ConcurrencySpec
from tickwheel.domain.models import Execution, ExecutionEventKind, ExecutionFilter
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.domain.submission import SubmitRequest, prepare_execution
from tickwheel.store.migrate import load_migrations
from tickwheel.store.postgres.store import MIGRATIONS, PostgresStore, Q, list_merged
from tickwheel.store.protocol import AttemptResult

pytestmark = pytest.mark.postgres

LEASE = timedelta(seconds=30)
_TABLES = (
    "execution_events, attempts, executions, definitions, api_keys, pauses, circuit_breakers,"
    " circuit_breaker_transitions"
)

OpenStore = Callable[[int], Awaitable[PostgresStore]]


@pytest.fixture
async def open_pg(pg_url: str) -> AsyncIterator[OpenStore]:
    """Opens PostgresStores on the session database, emptied first; each store's pool opens all
    its connections up front, so concurrent calls really run in parallel on the server."""
    stores: list[PostgresStore] = []

    async def open_store(connections: int) -> PostgresStore:
        store = await PostgresStore.open(pg_url, max_size=connections, min_size=connections)
        stores.append(store)
        return store

    first = await open_store(1)
    await first.migrate()
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute(f"TRUNCATE {_TABLES} CASCADE")
        # One row per shard from its migration: reset, not emptied (a shard left open to the
        # claims would hand its due rows to the next test's claims).
        await conn.execute(
            "UPDATE shard_leases SET owner = NULL, epoch = 0, expires_at = NULL,"
            " watermark = NULL, due_through = NULL"
        )
    try:
        yield open_store
    finally:
        for store in stores:
            await store.close()


async def _rows(pg_url: str, sql: str, *params: object) -> list[tuple[object, ...]]:
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        cursor = await conn.execute(sql, params)
        return await cursor.fetchall()


def _scans(
    node: dict[str, Any], *, gates: bool = True
) -> Iterator[tuple[str, str | None, str | None]]:
    """(node type, relation, index) of every scan in an EXPLAIN (FORMAT JSON) plan; without
    ``gates``, leaving out subplans (in the claim: its concurrency gate, which only an execution
    with a concurrency limit enters; an unlimited claim never runs them)."""
    if "Scan" in node["Node Type"]:
        yield node["Node Type"], node.get("Relation Name"), node.get("Index Name")
    for child in node.get("Plans", []):
        if gates or child.get("Parent Relationship") != "SubPlan":
            yield from _scans(child, gates=gates)


@dataclass(frozen=True)
class _Claim:
    worker: str
    started: float
    returned: float
    batch: list[Execution]


def _token(e: Execution) -> int:
    assert e.fencing_token is not None
    return e.fencing_token


def _ready_at(e: Execution) -> datetime:
    assert e.ready_at is not None
    return e.ready_at


async def test_concurrent_identical_submissions_create_one_execution(
    open_pg: OpenStore, pg_url: str
) -> None:
    store = await open_pg(50)
    # 50 requests carrying the same key, each with the id its API node would have generated.
    items = [new_execution(key="same-key") for _ in range(50)]
    outcomes = await asyncio.gather(*(store.execution_insert_many([i]) for i in items))
    flat = [o for [o] in outcomes]
    assert sum(o.created for o in flat) == 1
    winner = next(o.execution.execution_id for o in flat if o.created)
    assert {o.execution.execution_id for o in flat} == {winner}
    assert await _rows(
        pg_url, "SELECT count(*) FROM executions WHERE idempotency_key = %s", "same-key"
    ) == [(1,)]


async def test_concurrent_batches_sharing_keys_in_any_order_do_not_deadlock(
    open_pg: OpenStore, pg_url: str
) -> None:
    # Each batch holds the same keys in its own order: inserted in that order, two batches would
    # each hold a key the other waits for (PostgreSQL then aborts one with a deadlock error).
    store = await open_pg(8)
    for round_ in range(5):
        keys = [f"r{round_}-k{n}" for n in range(40)]
        batches = [[new_execution(key=k) for k in random.sample(keys, 40)] for _ in range(8)]
        results = await asyncio.gather(*(store.execution_insert_many(b) for b in batches))
        assert sum(o.created for outcomes in results for o in outcomes) == len(keys)
        for batch, outcomes in zip(batches, results, strict=True):
            assert [o.execution.idempotency_key for o in outcomes] == [
                i.idempotency_key for i in batch
            ]
    assert await _rows(pg_url, "SELECT count(*) FROM executions") == [(5 * 40,)]


async def test_cancel_racing_a_claim_has_exactly_one_winner(
    open_pg: OpenStore, pg_url: str
) -> None:
    submitter, canceller, claimer = await open_pg(1), await open_pg(1), await open_pg(1)
    cancelled: set[uuid.UUID] = set()
    claimed: set[uuid.UUID] = set()
    for n in range(200):
        item = new_execution(now=T0 + timedelta(milliseconds=n))
        await submitter.execution_insert_many([item])
        cancel = canceller.execution_cancel("acme", item.execution_id, T0 + timedelta(seconds=1))
        claim = claimer.execution_claim_ready("w1", 1, LEASE)
        if n % 2:  # alternate which request is sent first
            cancel_result, claim_result = await asyncio.gather(cancel, claim)
        else:
            claim_result, cancel_result = await asyncio.gather(claim, cancel)
        assert (cancel_result is None) != (claim_result == []), f"round {n}"
        assert [e.execution_id for e in claim_result] in ([], [item.execution_id])
        (cancelled if cancel_result is not None else claimed).add(item.execution_id)

    rows = await _rows(
        pg_url,
        "SELECT e.execution_id, e.status, count(a.*) FROM executions e"
        " LEFT JOIN attempts a USING (execution_id) GROUP BY e.execution_id, e.status",
    )
    assert len(rows) == 200
    for execution_id, status, attempts in rows:
        assert isinstance(execution_id, uuid.UUID)
        if execution_id in cancelled:
            assert (status, attempts) == ("CANCELLED", 0)
        else:
            assert execution_id in claimed
            assert (status, attempts) == ("RUNNING", 1)
    events = await _rows(pg_url, "SELECT execution_id, kind, detail FROM execution_events")
    assert {e[0] for e in events} == cancelled
    assert all(e[1] == str(ExecutionEventKind.CANCELLED) for e in events)
    assert all(e[2] == {"fromStatus": "READY", "attemptCount": 0, "error": None} for e in events)
    # Alternating who goes first, each side wins some (about half each here): a real race.
    assert cancelled and claimed


async def _open_every_shard(store: PostgresStore, through: datetime) -> None:
    """Every shard opened to the plain claim through ``through`` (docs/scaling.md, "Claiming a
    herd without promoting it"), by the database's clock (T0 is in its past)."""
    leases = await store.shard_lease_acquire("s", SHARD_COUNT, timedelta(minutes=5))
    assert len(await store.shard_lease_open("s", leases, through)) == SHARD_COUNT


async def test_cancel_racing_a_direct_claim_has_exactly_one_winner(
    open_pg: OpenStore, pg_url: str
) -> None:
    """As for a READY row: the claim's lock re-checks SCHEDULED on the newest version, and a row
    a cancel holds is skipped, so exactly one of them moves each due SCHEDULED row."""
    submitter, canceller, claimer = await open_pg(1), await open_pg(1), await open_pg(1)
    await _open_every_shard(submitter, T0 + timedelta(days=1))
    cancelled: set[uuid.UUID] = set()
    claimed: set[uuid.UUID] = set()
    for n in range(200):
        item = new_execution(execute_in=1, now=T0 + timedelta(milliseconds=n))
        await submitter.execution_insert_many([item])
        cancel = canceller.execution_cancel("acme", item.execution_id, T0 + timedelta(seconds=2))
        claim = claimer.execution_claim_ready("w1", 1, LEASE)
        if n % 2:  # alternate which request is sent first
            cancel_result, claim_result = await asyncio.gather(cancel, claim)
        else:
            claim_result, cancel_result = await asyncio.gather(claim, cancel)
        assert (cancel_result is None) != (claim_result == []), f"round {n}"
        assert [e.execution_id for e in claim_result] in ([], [item.execution_id])
        (cancelled if cancel_result is not None else claimed).add(item.execution_id)
    rows = await _rows(
        pg_url,
        "SELECT e.execution_id, e.status, count(a.*) FROM executions e"
        " LEFT JOIN attempts a USING (execution_id) GROUP BY e.execution_id, e.status",
    )
    assert len(rows) == 200
    for execution_id, status, attempts in rows:
        if execution_id in cancelled:
            assert (status, attempts) == ("CANCELLED", 0)
        else:
            assert execution_id in claimed
            assert (status, attempts) == ("RUNNING", 1)
    events = await _rows(pg_url, "SELECT execution_id, detail FROM execution_events")
    assert {e[0] for e in events} == cancelled
    assert all(e[1]["fromStatus"] == "SCHEDULED" for e in events)
    assert cancelled and claimed


async def test_concurrent_direct_claimers_never_share_an_execution(
    open_pg: OpenStore, pg_url: str
) -> None:
    submitter = await open_pg(1)
    items = [new_execution(execute_in=1) for _ in range(500)]  # over ~400 shards
    await submitter.execution_insert_many(items)
    await _open_every_shard(submitter, T0 + timedelta(days=1))
    claimers = [await open_pg(1) for _ in range(4)]
    claims: list[_Claim] = []

    async def claim_all(store: PostgresStore, worker: str) -> None:
        while True:
            started = time.perf_counter()
            batch = await store.execution_claim_ready(worker, 10, LEASE)
            if not batch:
                return
            claims.append(_Claim(worker, started, time.perf_counter(), batch))

    await asyncio.gather(*(claim_all(s, f"w{n}") for n, s in enumerate(claimers)))
    everything = [e for c in claims for e in c.batch]
    assert len({e.execution_id for e in everything}) == len(everything) == 500
    assert len({_token(e) for e in everything}) == 500
    assert all(e.ready_at == e.execute_at for e in everything)
    for c in claims:
        assert [_token(e) for e in c.batch] == sorted(_token(e) for e in c.batch)
    mismatched = await _rows(
        pg_url,
        "SELECT count(*) FROM executions e JOIN attempts a USING (execution_id)"
        " WHERE e.status <> 'RUNNING' OR a.attempt_number <> 1"
        " OR a.fencing_token <> e.fencing_token OR a.worker_id <> e.lease_owner",
    )
    assert mismatched == [(0,)]


async def test_concurrent_claimers_never_share_an_execution(
    open_pg: OpenStore, pg_url: str
) -> None:
    submitter = await open_pg(1)
    items = [new_execution(now=T0 + timedelta(milliseconds=n)) for n in range(500)]
    await submitter.execution_insert_many(items)
    claimers = [await open_pg(1) for _ in range(4)]
    claims: list[_Claim] = []

    async def claim_all(store: PostgresStore, worker: str) -> None:
        while True:
            started = time.perf_counter()
            batch = await store.execution_claim_ready(worker, 10, LEASE)
            if not batch:
                return
            claims.append(_Claim(worker, started, time.perf_counter(), batch))

    await asyncio.gather(*(claim_all(s, f"w{n}") for n, s in enumerate(claimers)))
    everything = [e for c in claims for e in c.batch]
    assert len({e.execution_id for e in everything}) == len(everything) == 500
    assert len({_token(e) for e in everything}) == 500
    assert len({c.worker for c in claims}) > 1, "the claimers did not overlap"
    for c in claims:
        # In a batch, claim order (here: oldest ready first) is token order.
        assert [_token(e) for e in c.batch] == sorted(_token(e) for e in c.batch)
        assert [e.ready_at for e in c.batch] == sorted(_ready_at(e) for e in c.batch)
    for earlier in claims:
        for later in claims:
            # A claim that began after another had returned (so committed) holds larger
            # tokens: this is what makes a re-claimed execution's token beat the old one.
            if earlier.returned < later.started:
                assert max(map(_token, earlier.batch)) < min(map(_token, later.batch))
    mismatched = await _rows(
        pg_url,
        "SELECT count(*) FROM executions e JOIN attempts a USING (execution_id)"
        " WHERE e.status <> 'RUNNING' OR a.attempt_number <> 1"
        " OR a.fencing_token <> e.fencing_token OR a.worker_id <> e.lease_owner",
    )
    assert mismatched == [(0,)]
    assert await _rows(pg_url, "SELECT count(*) FROM attempts") == [(500,)]


async def test_claim_candidates_use_the_ready_partial_index(
    open_pg: OpenStore, pg_url: str
) -> None:
    store = await open_pg(1)
    future = [new_execution(execute_in=3600 + n) for n in range(20_000)]
    for start in range(0, len(future), 2_000):
        await store.execution_insert_many(future[start : start + 2_000])
    await store.execution_insert_many([new_execution(priority=n % 5) for n in range(50)])
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute("ANALYZE executions")
        # EXPLAIN without ANALYZE plans the claim statement but does not run it.
        cursor = await conn.execute(
            "EXPLAIN (FORMAT JSON) " + Q["execution_claim_ready_unlimited"],
            {
                "worker_id": "w0",
                "limit": 10,
                "lease": LEASE,
                "now": None,
                "definition_uris": None,
                "rate_ids": None,
            },
        )
        [(plan,)] = await cursor.fetchall()
    [candidates] = [
        p for p in plan[0]["Plan"]["Plans"] if p.get("Subplan Name") == "CTE candidates"
    ]
    # Straight off the READY partial index, from the READY tenant (read once, in spread),
    # already in claim order (no sort): nothing reads the 20,000 SCHEDULED rows. (The pause
    # clause's probe of the pauses key is its own subplan.)
    scans = [
        s
        for s in _scans(candidates)
        if not {"pauses", "rate_limits", "rate_limits_pkey"} & {s[1], s[2]}
    ]
    assert scans == [
        ("CTE Scan", None, None),
        ("Index Scan", "executions", "executions_ready_tenant"),
    ], plan
    [walk] = [n for n in plan_nodes(candidates) if n.get("Index Name") == "executions_ready_tenant"]
    assert "tenant = " in walk["Index Cond"], walk
    assert "Sort" not in json.dumps(candidates), plan
    # The rest of the statement touches only the claimed rows, by primary key, and the ends of
    # executions_ready_tenant (is more than one tenant READY? Then the fair claim takes over).
    executions_scans = {s for s in _scans(plan[0]["Plan"]) if s[1] == "executions"}
    assert executions_scans == {
        ("Index Scan", "executions", "executions_ready_tenant"),
        ("Index Scan", "executions", "executions_pkey"),
        ("Index Only Scan", "executions", "executions_ready_tenant"),
    }, plan
    [spread] = [p for p in plan[0]["Plan"]["Plans"] if p.get("Subplan Name") == "CTE spread"]
    assert "Sort" not in json.dumps(spread), plan
    # The statement that applies limits walks the same index; its gate (entered only by an
    # execution with a limit) reads its group through the group's indexes.
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        cursor = await conn.execute(
            "EXPLAIN (FORMAT JSON) " + Q["execution_claim_ready"],
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
        [(limited,)] = await cursor.fetchall()
    [gated] = [p for p in limited[0]["Plan"]["Plans"] if p.get("Subplan Name") == "CTE candidates"]
    # Fair across tenants: the tenants by a skip scan of executions_ready_tenant, then each
    # tenant's first rows from it; the one sort is of those (at most tenants x batch rows).
    walked = [s for s in _scans(gated, gates=False) if s[1] == "executions"]
    assert walked == [("Index Scan", "executions", "executions_ready_tenant")], limited
    [tenants] = [p for p in limited[0]["Plan"]["Plans"] if p.get("Subplan Name") == "CTE tenants"]
    assert {s for s in _scans(tenants) if s[0] != "WorkTable Scan"} == {
        ("Index Only Scan", "executions", "executions_ready_tenant")
    }, limited
    gate = set(_scans(gated)) - set(_scans(gated, gates=False))
    # rate_limits and tenant_weights hold a few rows at most (none here): the planner may read
    # them whole, by their key or not.
    # (A bitmap index scan names its index only.)
    small = ("rate_limits", "tenant_weights", "rate_limits_pkey", "tenant_weights_pkey")
    gate = {g for g in gate if g[1] not in small and g[2] not in small}
    assert {index for _, _, index in gate} <= {
        "executions_concurrency_queue",
        "concurrency_holds_pkey",
        "pauses_pkey",
    }, limited
    claimed = await store.execution_claim_ready("w1", 10, LEASE)
    assert [e.priority for e in claimed] == [4] * 10


async def test_the_direct_claim_reads_the_open_shards_through_their_indexes(
    open_pg: OpenStore, pg_url: str
) -> None:
    """The claim while shards are open to the claims (docs/scaling.md, "Claiming a herd without
    promoting it"): its second source probes executions_due once per open shard, never the
    SCHEDULED rows as a whole; while READY rows fill the batch it reads no due row at all."""
    store = await open_pg(1)
    future = [new_execution(execute_in=3600 + n) for n in range(20_000)]
    for start in range(0, len(future), 2_000):
        await store.execution_insert_many(future[start : start + 2_000])
    await store.execution_insert_many([new_execution(execute_in=1) for _ in range(200)])
    await store.execution_insert_many([new_execution() for _ in range(50)])  # READY
    await _open_every_shard(store, T0 + timedelta(days=1))
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute("ANALYZE executions")
        await conn.execute("ANALYZE shard_leases")
        plans = []
        for limit in (10, 100):  # READY fills the batch; then it does not
            cursor = await conn.execute(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + Q["execution_claim_ready_direct"],
                {
                    "worker_id": "w0",
                    "limit": limit,
                    "lease": LEASE,
                    "now": None,
                    "definition_uris": None,
                    "rate_ids": None,
                    "walk": 512,
                },
            )
            [(plan,)] = await cursor.fetchall()
            plans.append(plan)
    for plan in plans:
        [direct] = [p for p in plan[0]["Plan"]["Plans"] if p.get("Subplan Name") == "CTE direct"]
        # (Every shard is open here: the planner reads the 1,024 lease rows whole.)
        assert {s[2] for s in _scans(direct) if s[1] == "executions"} == {"executions_due"}, plan
        assert "Sort" not in json.dumps(direct) and "Hash" not in json.dumps(direct), plan
    due_read = [
        sum(
            node["Actual Rows"] * node["Actual Loops"]
            for node in plan_nodes(plan[0]["Plan"])
            if node.get("Index Name") == "executions_due"
        )
        for plan in plans
    ]
    # (EXPLAIN ANALYZE claims.) READY first: 10 of the 50; then the 40 left and 60 due rows.
    assert due_read == [0, 60], plans


async def test_a_direct_claim_walks_on_from_the_shard_where_the_last_one_stopped(
    open_pg: OpenStore,
) -> None:
    """A store's direct claims walk the open shards from the shard its last one took its last
    row in, up, then round from shard 0, so that each passes a shard the claims emptied about
    once per herd instead of at every claim (docs/scaling.md, "The direct claim's walk")."""
    store = await open_pg(1)
    shards = (3, 3, 600, 900)
    items = [replace(new_execution(execute_in=1), shard_id=s) for s in shards]
    await store.execution_insert_many(items)
    await _open_every_shard(store, T0 + timedelta(days=1))
    store._direct_from = 500  # where an earlier claim stopped
    [first] = await store.execution_claim_ready("w", 1, LEASE)
    assert first.shard_id == 600 and store._direct_from == 600
    second = await store.execution_claim_ready("w", 2, LEASE)
    assert [e.shard_id for e in second] == [900, 3]  # in token order: up, then round
    assert store._direct_from == 3
    # From shard 3 up, then once more round from shard 0: a whole walk, and nothing left but
    # the one row; the next walk starts anywhere.
    [third] = await store.execution_claim_ready("w", 5, LEASE)
    assert third.shard_id == 3 and store._direct_from is None
    assert await store.execution_claim_ready("w", 5, LEASE) == []


async def test_a_claim_reads_only_its_candidates_when_statistics_never_saw_a_ready_row(
    open_pg: OpenStore, pg_url: str
) -> None:
    """READY is a state ANALYZE rarely catches. With statistics that estimate one READY row, a
    status predicate on the claiming UPDATE once made the planner walk every READY row per claim
    (78 ms instead of 1.5 ms with 19,000 READY among 10 M stored): it must go by primary key."""
    store = await open_pg(1)
    await store.execution_insert_many([new_execution(execute_in=3600 + n) for n in range(2_000)])
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute("ANALYZE executions")  # no READY row in the statistics
    for _ in range(2):
        await store.execution_insert_many([new_execution() for _ in range(1_000)])
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        cursor = await conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + Q["execution_claim_ready_unlimited"],
            {
                "worker_id": "w0",
                "limit": 10,
                "lease": LEASE,
                "now": None,
                "definition_uris": None,
                "rate_ids": None,
            },
        )
        [(plan,)] = await cursor.fetchall()
    executions_scans = {s for s in _scans(plan[0]["Plan"]) if s[1] == "executions"}
    assert executions_scans == {
        ("Index Scan", "executions", "executions_ready_tenant"),
        ("Index Scan", "executions", "executions_pkey"),
        ("Index Only Scan", "executions", "executions_ready_tenant"),
    }, plan
    # Is more than one tenant READY? The first and the last entry of the tenants' index.
    ends_read = sum(
        node["Actual Rows"] * node["Actual Loops"]
        for node in plan_nodes(plan[0]["Plan"])
        if node.get("Index Name") == "executions_ready_tenant"
        and node["Node Type"] == "Index Only Scan"
    )
    assert ends_read == 2, plan
    ready_rows_read = sum(
        node["Actual Rows"] * node["Actual Loops"]
        for node in plan_nodes(plan[0]["Plan"])
        if node.get("Index Name") == "executions_ready_tenant" and node["Node Type"] == "Index Scan"
    )
    assert ready_rows_read == 10, plan
    assert await _rows(pg_url, "SELECT count(*) FROM executions WHERE status = 'RUNNING'") == [
        (10,)
    ]


async def test_a_claim_over_a_keyed_backlog_walks_the_index_to_the_batch(
    open_pg: OpenStore, pg_url: str
) -> None:
    """6,000 READY executions under limit 1 fifo over 300 keys, 20 per key: a claim reads the
    heads at the front of executions_ready_tenant and stops at the batch. Planned as the store
    runs it (never prepared: claims.py), the gate's subqueries once made the plan read and sort
    every READY row (110 ms a claim with 17,000 READY)."""
    store = await open_pg(1)
    spec = ConcurrencySpec(limit=1, key="${{ inputs.name }}")
    d = definition()
    for batch in range(20):
        await store.execution_insert_many(
            [
                prepare_execution(
                    SubmitRequest("registry://jobs/greet", {"name": f"k{k}"}, concurrency=spec),
                    d, "acme", T0 + timedelta(seconds=batch),
                )
                for k in range(300)
            ]
        )  # fmt: skip
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute("ANALYZE executions")
        await conn.execute("BEGIN")
        cursor = await conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + Q["execution_claim_ready"],
            CLAIM_PARAMS,
            prepare=False,
        )
        [(plan,)] = await cursor.fetchall()
        await conn.execute("ROLLBACK")
    # One tenant: its rows from executions_ready_tenant (the fair claim), to the batch.
    ready_rows_read = sum(
        node["Actual Rows"] * node["Actual Loops"]
        for node in plan_nodes(plan[0]["Plan"])
        if node.get("Index Name") == "executions_ready_tenant" and node["Node Type"] == "Index Scan"
    )
    assert ready_rows_read == 16, plan
    # Priced below jit_above_cost: compiling the plan cost ~50 ms, against a ~1.5 ms claim.
    assert "JIT" not in plan[0], plan
    assert "Bitmap Heap Scan" not in json.dumps(plan[0]["Plan"]["Plans"][0]), plan
    claimed = await store.execution_claim_ready("w1", 16, LEASE, T0 + timedelta(minutes=1))
    assert len({e.inputs["name"] for e in claimed}) == 16


async def test_instants_come_back_in_utc_whatever_the_session_timezone(pg_url: str) -> None:
    store = await PostgresStore.open(pg_url + "?options=-c%20TimeZone%3DAsia/Tokyo", max_size=1)
    try:
        await store.migrate()
        item = new_execution(tenant=f"tz-{uuid.uuid4().hex[:8]}", execute_in=90)
        [outcome] = await store.execution_insert_many([item])
        assert outcome.execution.execute_at == T0 + timedelta(seconds=90)
        assert outcome.execution.execute_at.tzinfo is UTC
        assert outcome.execution.bucket_start.tzinfo is UTC
    finally:
        await store.close()


async def test_every_session_runs_in_utc_and_keeps_the_urls_own_options(pg_url: str) -> None:
    """The pools' sessions run in UTC (timestamps then load without a conversion each), on both
    pools, and a setting the URL gives (here statement_timeout) is still applied: the claim
    pool's planner options once replaced it."""
    url = pg_url + "?options=-c%20TimeZone%3DAsia/Tokyo%20-c%20statement_timeout%3D4321"
    store = await PostgresStore.open(url, max_size=1)
    try:
        for pool in (store.pool, store._hot):
            async with pool.connection() as conn:
                cursor = await conn.execute(
                    "SELECT current_setting('TimeZone') AS tz,"
                    " current_setting('statement_timeout') AS timeout, now() AS at"
                )
                row = await cursor.fetchone()
            assert row is not None
            assert (row["tz"], row["timeout"]) == ("UTC", "4321ms")
            assert row["at"].tzinfo is UTC
    finally:
        await store.close()


async def test_the_drain_never_converts_a_query_outside_psycopgs_cache(
    open_pg: OpenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim and the finish are sent as psycopg caches them (under 4 kB, comments left
    out): a longer statement is converted by a regular expression on every execution
    (claims.HOT_STATEMENTS, tests/store/test_claimed_rows.py)."""
    store = await open_pg(1)
    uncached: list[bytes] = []
    convert: Callable[..., Any] = _queries._query2pg_nocache

    def counted(query: bytes, encoding: str) -> Any:
        uncached.append(query)
        return convert(query, encoding)

    monkeypatch.setattr(_queries, "_query2pg_nocache", counted)
    await store.execution_insert_many([new_execution(now=T0) for _ in range(3)])
    claimed = await store.execution_claim_ready("w1", 3, LEASE, T0)
    assert len(claimed) == 3
    done = [
        AttemptResult(e.execution_id, e.fencing_token or 0, AttemptStatus.SUCCEEDED,
                      ExecutionStatus.SUCCEEDED, output=None)
        for e in claimed
    ]  # fmt: skip
    assert await store.attempt_finish_many(done, T0) == [True, True, True]
    assert uncached == []


async def test_two_processes_migrating_at_once_apply_each_migration_once(pg_url: str) -> None:
    # pg_url only for its skip-without-PostgreSQL; this test needs an empty database of its own.
    name = f"tickwheel_migrate_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(PG_ADMIN_URL, autocommit=True) as conn:
        await conn.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    try:
        stores = [await PostgresStore.open(url, max_size=1) for _ in range(4)]
        try:
            everything = [m.label for m in load_migrations(MIGRATIONS)]
            assert everything[0] == "0001_initial"
            assert await stores[0].migrations_pending() == everything
            applied = await asyncio.gather(*(s.migrate() for s in stores))
            assert sorted(applied) == [[], [], [], everything]
            assert await stores[0].migrations_pending() == []
        finally:
            for s in stores:
                await s.close()
    finally:
        async with await psycopg.AsyncConnection.connect(PG_ADMIN_URL, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("fenced", [False, True])
async def test_a_dense_herds_promotion_by_id_reads_only_its_rows(
    open_pg: OpenStore, pg_url: str, fenced: bool
) -> None:
    """A herd of 100,000 puts ~100 due rows in each shard. Written as a join of the batch's ids
    with the shards, the promotion was driven through executions_due and read every due row of
    each shard to find the batch's few (most of a batch of 500): one primary-key probe per id."""
    store = await open_pg(1)
    items = [new_execution(execute_in=5, key=f"k{n}") for n in range(3_000)]
    # Six shards: 500 due rows each, as dense as a herd of 500,000 over 1,024 shards.
    items = [replace(i, shard_id=n % 6) for n, i in enumerate(items)]
    await store.execution_insert_many(items)
    ids = sorted(i.execution_id for i in items)[::100]  # 30 of them, in every shard
    now = T0 + timedelta(seconds=5)
    params: dict[str, object] = {"execution_ids": ids, "now": now}
    if fenced:
        leases = await store.shard_lease_acquire("s", 6, timedelta(seconds=30), T0)
        query = Q["execution_promote_ids_fenced"]
        params |= {
            "owner": "s",
            "shards": [x.shard_id for x in leases],
            "epochs": [x.epoch for x in leases],
            "channel": "tickwheel_test",
            "payload": "",
            "direct": False,
        }
    else:
        query = Q["execution_promote_ids"]
        params |= {"shards": list(range(6))}
    async with await psycopg.AsyncConnection.connect(pg_url) as conn:
        cursor = await conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + query, params)
        [(plan,)] = await cursor.fetchall()
        await conn.rollback()
    [due] = [p for p in plan[0]["Plan"]["Plans"] if p.get("Subplan Name") == "CTE due"]
    # Rows visited: those returned and those a filter removed (both averaged per loop).
    read = {
        node.get("Index Name"): (node["Actual Rows"] + node.get("Rows Removed by Filter", 0))
        * node["Actual Loops"]
        for node in plan_nodes(due)
        if node.get("Relation Name") == "executions"
    }
    assert read == {"executions_pkey": len(ids)}, plan
    promoted = await store.execution_promote_ids(ids, list(range(6)), now)
    assert set(promoted.moved) == set(ids)


async def test_a_tenants_listing_reads_one_ordered_page_per_status(
    open_pg: OpenStore, pg_url: str
) -> None:
    """Without (tenant, execution_id) (migration 0021), a tenant's listing is one page of each
    status asked for, each read newest first from executions_tenant_status: no sort of the
    tenant's rows, whatever it holds, and a status filter reads only its own range."""
    store = await open_pg(1)
    crowd = [new_execution("initech", execute_in=None if n % 4 else 600) for n in range(6_000)]
    for start in range(0, len(crowd), 2_000):
        await store.execution_insert_many(crowd[start : start + 2_000])
    few = [new_execution("acme", execute_in=None if n % 2 else 600) for n in range(40)]
    await store.execution_insert_many(few)
    params = {
        "tenant": "acme",
        "before": None,
        "statuses": None,
        "definition_uri": None,
        "idempotency_key": None,
        "key_like": None,
        "execute_from": None,
        "execute_to": None,
        "limit": 11,
    }
    unfiltered = list_merged(frozenset(ExecutionStatus))
    failed = list_merged(frozenset({ExecutionStatus.FAILED, ExecutionStatus.READY}))
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute("ANALYZE executions")
        plans = []
        for sql in (unfiltered, failed):
            cursor = await conn.execute("EXPLAIN (FORMAT JSON) " + sql, params)
            [(plan,)] = await cursor.fetchall()
            plans.append(plan)
    for plan, pages in zip(plans, (len(ExecutionStatus), 2), strict=True):
        scans = list(_scans(plan[0]["Plan"]))
        assert scans == [("Index Scan", "executions", "executions_tenant_status")] * pages, plan
        assert '"Sort"' not in json.dumps(plan), plan
    listed = await store.execution_list("acme", ExecutionFilter(), None, 100)
    assert [e.execution_id for e in listed] == sorted((e.execution_id for e in few), reverse=True)


async def test_deleting_executions_deletes_their_attempt_rows(
    open_pg: OpenStore, pg_url: str
) -> None:
    """The attempts' foreign key became a delete trigger (migration 0021): the retention
    pruner's DELETE still takes the attempt rows with it, and a TRUNCATE of executions empties
    attempts. (attempt_list joins its execution, so it could not see a row left behind.)"""
    store = await open_pg(1)
    await store.execution_insert_many([new_execution(key=f"k{n}") for n in range(4)])
    claimed = await store.execution_claim_ready("w1", 4, LEASE)
    results = [
        AttemptResult(
            e.execution_id,
            e.fencing_token or 0,
            AttemptStatus.SUCCEEDED,
            ExecutionStatus.SUCCEEDED,
        )
        for e in claimed
    ]
    await store.attempt_finish_many(results)
    gone, kept = claimed[:3], claimed[3]
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute(
            "UPDATE executions SET finished_at = %s WHERE execution_id = ANY (%s)",
            (T0 - timedelta(days=40), [e.execution_id for e in gone]),
        )
    assert await store.execution_prune(T0 - timedelta(days=30), 2) == 2
    assert await store.execution_prune(T0 - timedelta(days=30), 2) == 1
    left = await _rows(pg_url, "SELECT execution_id FROM attempts")
    assert left == [(kept.execution_id,)]
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute("TRUNCATE executions, execution_events, execution_outputs")
    assert await _rows(pg_url, "SELECT count(*) FROM attempts") == [(0,)]
