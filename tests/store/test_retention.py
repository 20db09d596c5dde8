"""Counts by status and retention pruning, on both backends: pruning deletes only terminal
executions finished before the cut-off, in bounded batches, with everything that hangs off
them, and frees their idempotency keys."""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.factories import T0, new_execution
from tickwheel.domain.models import Execution
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.engine.pruner import count_prunable, prune
from tickwheel.store.protocol import AttemptResult, Store

LEASE = timedelta(seconds=30)
DAY = timedelta(days=1)


async def _run(
    store: Store, at: datetime, status: ExecutionStatus, key: str | None = None
) -> Execution:
    """An execution submitted at ``at`` and finished there with ``status`` by a worker."""
    item = new_execution(now=at, key=key)
    await store.execution_insert_many([item])
    [claimed] = await store.execution_claim_ready("w1", 1, LEASE, at)
    assert claimed.fencing_token is not None
    ok = status is ExecutionStatus.SUCCEEDED
    attempt = (
        AttemptStatus.SUCCEEDED if status is ExecutionStatus.SUCCEEDED else AttemptStatus.FAILED
    )
    result = AttemptResult(
        claimed.execution_id,
        claimed.fencing_token,
        attempt,
        status,
        output={"greeting": "hi"} if ok else None,
        output_reference=f"tickwheel://executions/{claimed.execution_id}/output" if ok else None,
        output_size=17,
        error=None if ok else {"kind": "error", "message": "x"},
    )
    assert await store.attempt_finish(result, at)
    got = await store.execution_get("acme", claimed.execution_id)
    assert got is not None
    return got


async def _cancelled(store: Store, at: datetime) -> Execution:
    item = new_execution(now=at, execute_in=3600)
    await store.execution_insert_many([item])
    got = await store.execution_cancel("acme", item.execution_id, at)
    assert got is not None
    return got


async def test_counts_by_status_cover_every_status_and_window_terminal_ones(store: Store) -> None:
    counts = await store.execution_count_by_status()
    assert counts == dict.fromkeys(ExecutionStatus, 0)
    await _run(store, T0 - 3 * DAY, ExecutionStatus.SUCCEEDED)
    await _run(store, T0, ExecutionStatus.SUCCEEDED)
    await _run(store, T0, ExecutionStatus.FAILED)
    await _cancelled(store, T0 - 3 * DAY)
    await store.execution_insert_many(
        [new_execution(now=T0, execute_in=60), new_execution(now=T0, execute_in=60)]
    )
    await store.execution_insert_many([new_execution(now=T0)])
    everything = await store.execution_count_by_status()
    assert everything[ExecutionStatus.SCHEDULED] == 2
    assert everything[ExecutionStatus.READY] == 1
    assert everything[ExecutionStatus.RUNNING] == 0
    assert everything[ExecutionStatus.SUCCEEDED] == 2
    assert everything[ExecutionStatus.FAILED] == 1
    assert everything[ExecutionStatus.CANCELLED] == 1
    recent = await store.execution_count_by_status(T0 - DAY)
    # The window limits terminal statuses only; live work is always counted in full.
    assert recent == {**everything, ExecutionStatus.SUCCEEDED: 1, ExecutionStatus.CANCELLED: 0}


async def test_prune_deletes_old_terminal_executions_in_batches_and_keeps_the_rest(
    store: Store,
) -> None:
    old = [await _run(store, T0 - 40 * DAY, ExecutionStatus.SUCCEEDED) for _ in range(5)]
    old.append(await _run(store, T0 - 35 * DAY, ExecutionStatus.FAILED, key="order-7"))
    old.append(await _cancelled(store, T0 - 31 * DAY))
    recent = await _run(store, T0 - 29 * DAY, ExecutionStatus.SUCCEEDED)
    # Live work is never pruned, however old its submission.
    await store.execution_insert_many([new_execution(now=T0 - 90 * DAY)])
    [running] = await store.execution_claim_ready("w2", 1, LEASE, T0 - 90 * DAY)
    waiting = new_execution(now=T0 - 90 * DAY, execute_in=120 * 86400)
    await store.execution_insert_many([waiting])
    cutoff = T0 - 30 * DAY

    assert await count_prunable(store, cutoff) == 7
    assert await store.execution_prune(cutoff, 3) == 3  # one bounded batch
    assert await prune(store, cutoff, batch=3) == 4  # 3, then a short batch of 1
    assert await store.execution_prune(cutoff, 3) == 0
    assert await count_prunable(store, cutoff) == 0

    for gone in old:
        assert await store.execution_get("acme", gone.execution_id) is None
        assert await store.attempt_list("acme", gone.execution_id) == []
        assert await store.execution_event_list("acme", gone.execution_id) == []
        assert await store.execution_output_get("acme", gone.execution_id) is None
    assert await store.execution_get("acme", recent.execution_id) is not None
    assert await store.execution_output_get("acme", recent.execution_id) == {"greeting": "hi"}
    kept = await store.execution_get("acme", running.execution_id)
    assert kept is not None and kept.status is ExecutionStatus.RUNNING
    kept = await store.execution_get("acme", waiting.execution_id)
    assert kept is not None and kept.status is ExecutionStatus.SCHEDULED

    # The key of a pruned execution is free again: a new submission creates a new execution.
    again = new_execution(now=T0, key="order-7")
    [outcome] = await store.execution_insert_many([again])
    assert outcome.created and outcome.execution.execution_id == again.execution_id
