"""Claim, fenced finish and replay: the store half of the execution state machine."""

from __future__ import annotations

from datetime import timedelta

from tests.factories import T0, new_execution
from tickwheel.domain.models import Execution, ExecutionEventKind
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.store.protocol import AttemptResult, Store

LEASE = timedelta(seconds=30)


async def test_claim_orders_by_priority_then_readiness_and_tokens_grow(store: Store) -> None:
    low = new_execution(priority=0)
    high = new_execution(priority=5)
    later = new_execution(execute_in=60)
    await store.execution_insert_many([low, high, later])
    first = await store.execution_claim_ready("w1", 1, LEASE, T0)
    second = await store.execution_claim_ready("w2", 10, LEASE, T0)
    assert [e.execution_id for e in first] == [high.execution_id]
    assert [e.execution_id for e in second] == [low.execution_id]
    claimed = first[0]
    assert claimed.status is ExecutionStatus.RUNNING
    assert claimed.lease_owner == "w1"
    assert claimed.lease_expires_at == T0 + LEASE
    assert claimed.attempt_count == 1
    assert claimed.started_at == T0
    assert first[0].fencing_token is not None and second[0].fencing_token is not None
    assert second[0].fencing_token > first[0].fencing_token
    attempts = await store.attempt_list("acme", high.execution_id)
    assert [(a.attempt_number, a.worker_id, a.status) for a in attempts] == [
        (1, "w1", AttemptStatus.RUNNING)
    ]
    assert await store.execution_claim_ready("w3", 10, LEASE, T0) == []


async def test_finish_with_current_token_wins_and_stale_token_changes_nothing(
    store: Store,
) -> None:
    item = new_execution()
    await store.execution_insert_many([item])
    [claimed] = await store.execution_claim_ready("w1", 1, LEASE, T0)
    assert claimed.fencing_token is not None
    stale = AttemptResult(
        execution_id=item.execution_id,
        fencing_token=claimed.fencing_token - 1,
        attempt_status=AttemptStatus.SUCCEEDED,
        execution_status=ExecutionStatus.SUCCEEDED,
        output={"greeting": "zombie"},
    )
    assert await store.attempt_finish(stale, T0) is False
    current = AttemptResult(
        execution_id=item.execution_id,
        fencing_token=claimed.fencing_token,
        attempt_status=AttemptStatus.SUCCEEDED,
        execution_status=ExecutionStatus.SUCCEEDED,
        output={"greeting": "Hello, Ada!"},
    )
    done_at = T0 + timedelta(seconds=2)
    assert await store.attempt_finish(current, done_at) is True
    assert await store.attempt_finish(current, done_at) is False  # not RUNNING any more
    got = await store.execution_get("acme", item.execution_id)
    assert got is not None
    assert got.status is ExecutionStatus.SUCCEEDED
    assert got.output == {"greeting": "Hello, Ada!"}
    assert got.finished_at == done_at
    assert got.lease_owner is None
    [attempt] = await store.attempt_list("acme", item.execution_id)
    assert attempt.status is AttemptStatus.SUCCEEDED
    assert attempt.finished_at == done_at


async def _fail(store: Store, key: str | None = None) -> str:
    item = new_execution(key=key)
    await store.execution_insert_many([item])
    [claimed] = await store.execution_claim_ready("w1", 1, LEASE, T0)
    assert claimed.fencing_token is not None
    result = AttemptResult(
        execution_id=item.execution_id,
        fencing_token=claimed.fencing_token,
        attempt_status=AttemptStatus.FAILED,
        execution_status=ExecutionStatus.FAILED,
        error={"kind": "permanent", "message": "boom"},
    )
    assert await store.attempt_finish(result, T0)
    return str(item.execution_id)


async def test_replay_of_a_dead_letter_keeps_its_history(store: Store) -> None:
    import uuid

    execution_id = uuid.UUID(await _fail(store))
    later = T0 + timedelta(minutes=5)
    replayed = await store.execution_replay("acme", execution_id, 4, later)
    assert replayed is not None
    assert replayed.status is ExecutionStatus.READY
    assert replayed.attempt_count == 1
    assert replayed.max_attempts == 1 + 4
    assert replayed.error is None
    assert replayed.ready_at == later
    [attempt] = await store.attempt_list("acme", execution_id)
    assert attempt.error == {"kind": "permanent", "message": "boom"}
    [event] = await store.execution_event_list("acme", execution_id)
    assert event.kind is ExecutionEventKind.REPLAYED
    assert event.detail == {
        "fromStatus": "FAILED",
        "attemptCount": 1,
        "error": {"kind": "permanent", "message": "boom"},
    }
    [again] = await store.execution_claim_ready("w2", 1, LEASE, later)
    assert again.attempt_count == 2
    assert [a.attempt_number for a in await store.attempt_list("acme", execution_id)] == [1, 2]
    assert await store.execution_replay("globex", execution_id, 4, later) is None


def _lost(claimed: Execution, status: ExecutionStatus) -> AttemptResult:
    assert claimed.fencing_token is not None
    return AttemptResult(
        claimed.execution_id,
        claimed.fencing_token,
        AttemptStatus.ABANDONED,
        status,
        error={"kind": "lost", "message": "lease expired"},
        next_attempt_at=T0 + timedelta(minutes=2) if status is ExecutionStatus.RETRY_WAIT else None,
        lease_expired_only=True,
    )


async def test_reaping_a_batch_skips_renewed_leases_and_rows_reaped_already(store: Store) -> None:
    items = [new_execution() for _ in range(4)]
    await store.execution_insert_many(items)
    claimed = await store.execution_claim_ready("w1", 4, LEASE, T0)
    later = T0 + LEASE + timedelta(seconds=1)
    renewed, gone, retry, dead = claimed
    assert renewed.fencing_token is not None
    # Meanwhile: one worker renewed its lease, and another reaper already took one.
    assert await store.execution_heartbeat(
        renewed.execution_id, renewed.fencing_token, LEASE, T0 + timedelta(seconds=29)
    )
    assert await store.execution_reap([_lost(gone, ExecutionStatus.RETRY_WAIT)], later) == [
        gone.execution_id
    ]
    batch = [
        _lost(renewed, ExecutionStatus.RETRY_WAIT),
        _lost(gone, ExecutionStatus.RETRY_WAIT),
        _lost(retry, ExecutionStatus.RETRY_WAIT),
        _lost(dead, ExecutionStatus.FAILED),
    ]
    reaped = await store.execution_reap(batch, later)
    assert sorted(reaped) == sorted([retry.execution_id, dead.execution_id])

    async def now_(execution: Execution) -> Execution:
        got = await store.execution_get("acme", execution.execution_id)
        assert got is not None
        return got

    assert (await now_(renewed)).status is ExecutionStatus.RUNNING
    assert (await now_(retry)).status is ExecutionStatus.RETRY_WAIT
    assert (await now_(dead)).status is ExecutionStatus.FAILED
    assert (await now_(dead)).finished_at == later
    [attempt] = await store.attempt_list("acme", dead.execution_id)
    assert attempt.status is AttemptStatus.ABANDONED
    assert attempt.error == {"kind": "lost", "message": "lease expired"}
    assert await store.execution_reap([], later) == []
