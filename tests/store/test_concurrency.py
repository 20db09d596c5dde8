"""Concurrency limits at claim time (docs/flow-control.md), on both backends: at most ``limit``
executions of one (tenant, definition, key) RUNNING, FIFO per key, slots freed by every way out
of RUNNING, and exact under concurrent claimers."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from tests.factories import T0, definition
from tickwheel.domain.concurrency import ConcurrencySpec
from tickwheel.domain.models import Execution
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.domain.submission import NewExecution, SubmitRequest, prepare_execution
from tickwheel.store.protocol import AttemptResult, Store, Topic

LEASE = timedelta(seconds=30)
KEYED = definition(
    "sync",
    inputs={"customer": "string", "n": {"type": "integer", "default": 0}},
    concurrency={"key": "${{ inputs.customer }}", "limit": 1},
)


def keyed(
    customer: str,
    n: int = 0,
    *,
    at: float = 0,
    spec: ConcurrencySpec | None = None,
    tenant: str = "acme",
    d: Any = KEYED,
) -> NewExecution:
    """One execution of ``sync`` for ``customer``, due ``at`` seconds after T0 (submitted at the
    later of T0 and that, so that it is READY from the start)."""
    request = SubmitRequest(
        definition_uri="registry://jobs/sync",
        inputs={"customer": customer, "n": n},
        execute_at=T0 + timedelta(seconds=at),
        concurrency=spec,
    )
    return prepare_execution(request, d, tenant, T0 + timedelta(seconds=max(at, 0) + 1))


def unkeyed() -> NewExecution:
    request = SubmitRequest(definition_uri="registry://jobs/greet", inputs={"name": "Ada"})
    return prepare_execution(request, definition(), "acme", T0)


def done(e: Execution, status: ExecutionStatus = ExecutionStatus.SUCCEEDED) -> AttemptResult:
    assert e.fencing_token is not None
    retry = status is ExecutionStatus.RETRY_WAIT
    return AttemptResult(
        e.execution_id,
        e.fencing_token,
        AttemptStatus.FAILED if retry else AttemptStatus.SUCCEEDED,
        status,
        error={"kind": "error", "message": "again"} if retry else None,
        next_attempt_at=T0 + timedelta(seconds=5) if retry else None,
    )


def lost_lease(e: Execution) -> AttemptResult:
    """The reaper's result for ``e``, claimed by a worker that died: dead-lettered."""
    assert e.fencing_token is not None
    return AttemptResult(
        e.execution_id, e.fencing_token, AttemptStatus.ABANDONED, ExecutionStatus.FAILED,
        error={"kind": "lost", "message": "lease expired"}, lease_expired_only=True,
    )  # fmt: skip


async def claim(store: Store, n: int = 10) -> list[Execution]:
    return await store.execution_claim_ready("w", n, LEASE, T0 + timedelta(seconds=10))


def inputs_of(claimed: list[Execution]) -> list[tuple[str, int]]:
    return sorted((e.inputs["customer"], e.inputs["n"]) for e in claimed)


async def test_the_key_is_evaluated_at_submit_and_stored(store: Store) -> None:
    item = keyed("c-1")
    assert item.concurrency is not None and item.concurrency.key == "c-1"
    await store.execution_insert_many([item])
    got = await store.execution_get("acme", item.execution_id)
    assert got is not None and got.concurrency == item.concurrency
    assert (await store.execution_get("acme", unkeyed().execution_id)) is None


async def test_limit_one_fifo_runs_one_per_key_in_order_and_a_retry_keeps_its_place(
    store: Store,
) -> None:
    a = [keyed("a", n, at=n) for n in range(3)]
    b = keyed("b", 0)
    free = unkeyed()
    # Inserted out of order: the order is executeAt's, not the insert's.
    await store.execution_insert_many([a[2], b, a[1], free, a[0]])
    first = await claim(store)
    assert inputs_of([e for e in first if e.concurrency]) == [("a", 0), ("b", 0)]
    assert free.execution_id in {e.execution_id for e in first}
    assert await claim(store) == []
    [a0] = [e for e in first if e.inputs.get("customer") == "a"]
    # a0 fails and waits for its retry: a1 still may not start (a retry keeps its place).
    assert await store.attempt_finish(done(a0, ExecutionStatus.RETRY_WAIT), T0)
    assert await claim(store) == []
    promoted = await store.execution_promote_due(range(1024), 100, T0 + timedelta(seconds=6))
    assert list(promoted.moved) == [a0.execution_id]
    [again] = await claim(store)
    assert again.execution_id == a0.execution_id and again.attempt_count == 2
    assert await store.attempt_finish(done(again), T0)
    [a1] = await claim(store)
    assert a1.execution_id == a[1].execution_id
    assert await store.attempt_finish(done(a1), T0)
    [a2] = await claim(store)
    assert a2.execution_id == a[2].execution_id


async def test_order_none_and_a_limit_of_two(store: Store) -> None:
    spec = ConcurrencySpec(limit=2, key="${{ inputs.customer }}", order="none")
    items = [keyed("k", n, at=n, spec=spec) for n in range(5)]
    await store.execution_insert_many(items)
    first = await claim(store, 1)
    second = await claim(store, 10)
    assert len(first) == 1 and len(second) == 1
    assert await claim(store) == []
    assert await store.attempt_finish(done(second[0]), T0)
    assert len(await claim(store)) == 1
    assert await claim(store) == []


async def test_fifo_with_a_limit_of_two_starts_the_first_two_only(store: Store) -> None:
    spec = ConcurrencySpec(limit=2, key="${{ inputs.customer }}", order="fifo")
    items = [keyed("k", n, at=n, spec=spec) for n in range(4)]
    await store.execution_insert_many(items)
    assert inputs_of(await claim(store)) == [("k", 0), ("k", 1)]
    assert await claim(store) == []


async def test_a_limit_without_a_key_is_for_the_whole_definition(store: Store) -> None:
    whole = definition("sync", inputs={"customer": "string", "n": "integer"},
                       concurrency={"limit": 1})  # fmt: skip
    items = [keyed(c, 0, at=i, d=whole) for i, c in enumerate("xyz")]
    await store.execution_insert_many(items)
    [one] = await claim(store)
    assert one.concurrency is not None and one.concurrency.key == ""
    assert one.execution_id == items[0].execution_id
    assert await claim(store) == []


async def test_tenants_and_keys_do_not_share_slots(store: Store) -> None:
    await store.execution_insert_many([keyed("a"), keyed("a", tenant="other"), keyed("b")])
    assert len(await claim(store)) == 3


async def test_every_way_out_of_running_frees_the_slot(store: Store) -> None:
    items = [keyed("a", n, at=n) for n in range(4)]
    await store.execution_insert_many(items)
    # A lost lease, reaped: the retry keeps its place and holds no slot while it waits.
    [lost] = await claim(store)
    assert lost.fencing_token is not None
    reaped = lost_lease(lost)
    assert await store.execution_reap([reaped], T0 + LEASE + timedelta(minutes=1)) == [
        lost.execution_id
    ]
    # A graceful release (back to READY) frees it too, and the released one is still first.
    [second] = await claim(store)
    assert second.execution_id == items[1].execution_id and second.fencing_token is not None
    assert await store.execution_release(second.execution_id, second.fencing_token, T0)
    [again] = await claim(store)
    assert again.execution_id == items[1].execution_id
    assert await store.attempt_finish(done(again, ExecutionStatus.FAILED), T0)
    [third] = await claim(store)
    assert third.execution_id == items[2].execution_id


async def test_an_earlier_execution_submitted_late_waits_for_the_running_one(store: Store) -> None:
    await store.execution_insert_many([keyed("a", 1, at=5)])
    [running] = await claim(store)
    await store.execution_insert_many([keyed("a", 0, at=0)])
    assert await claim(store) == []  # first in order, but the slot is taken
    assert await store.attempt_finish(done(running), T0)
    assert inputs_of(await claim(store)) == [("a", 0)]


async def test_concurrent_claimers_never_exceed_a_limit(store: Store) -> None:
    """Eight claimers at once, over and over (on PostgreSQL each on its own connection of the
    pool, under READ COMMITTED): never two of one key, and each key in order."""
    items = [keyed(f"k{k}", n, at=n) for k in range(20) for n in range(5)]
    order = {item.execution_id: (item.inputs["customer"], item.inputs["n"]) for item in items}
    await store.execution_insert_many(items)
    started: list[tuple[str, int]] = []
    while len(started) < len(items):
        batches = await asyncio.gather(*(claim(store, 7) for _ in range(8)))
        claimed = [e for batch in batches for e in batch]
        keys = [order[e.execution_id][0] for e in claimed]
        assert len(keys) == len(set(keys)), "two executions of one key ran at once"
        started += [order[e.execution_id] for e in claimed]
        await store.attempt_finish_many([done(e) for e in claimed], T0)
    for k in range(20):
        assert [n for key, n in started if key == f"k{k}"] == list(range(5))


async def test_a_finish_that_frees_a_slot_wakes_the_workers(store: Store) -> None:
    await store.execution_insert_many([keyed("a", 0, at=0), keyed("a", 1, at=1)])
    [first] = await claim(store)
    await _drain_ready(store)
    assert await store.attempt_finish(done(first), T0)
    assert await store.wait_for(Topic.READY, 1.0)
    assert inputs_of(await claim(store)) == [("a", 1)]


async def _drain_ready(store: Store) -> None:
    while await store.wait_for(Topic.READY, 0):  # whatever the insert or claim signalled
        pass


async def test_a_reap_that_frees_a_slot_wakes_the_workers(store: Store) -> None:
    """A worker that hears every signal polls seldom (WorkerSettings.heard_poll): what waits
    for a dead worker's slot must not wait for that poll."""
    await store.execution_insert_many([keyed("a", 0, at=0), keyed("a", 1, at=1)])
    [lost] = await claim(store)
    assert lost.fencing_token is not None
    await _drain_ready(store)
    reaped = lost_lease(lost)
    assert await store.execution_reap([reaped], T0 + LEASE + timedelta(minutes=1))
    assert await store.wait_for(Topic.READY, 1.0)
    assert inputs_of(await claim(store)) == [("a", 1)]


async def test_a_claim_expired_by_its_start_by_frees_its_slot_and_wakes_the_workers(
    store: Store,
) -> None:
    await store.execution_insert_many([keyed("a", 0, at=0), keyed("a", 1, at=1)])
    [late] = await claim(store)
    assert late.fencing_token is not None
    await _drain_ready(store)
    error = {"kind": "expired", "message": "claimed after its startBy"}
    assert await store.execution_expire_claimed(late.execution_id, late.fencing_token, error, T0)
    assert await store.wait_for(Topic.READY, 1.0)
    assert inputs_of(await claim(store)) == [("a", 1)]


async def test_the_gauges_count_what_waits_for_a_limit_and_the_slots_held(store: Store) -> None:
    assert await store.concurrency_counts() == (0, 0)
    await store.execution_insert_many([*(keyed("a", n, at=n) for n in range(3)), unkeyed()])
    assert await store.concurrency_counts() == (3, 0)
    claimed = await claim(store)
    assert len(claimed) == 2  # a0 and the unlimited one
    assert await store.concurrency_counts() == (2, 1)
