"""Retries keep their place in the queue, and attempts lost to a worker's death are counted apart
(issue 12, part 5). Both backends."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from tests.factories import T0, new_execution
from tickwheel.domain.models import Execution
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.store.protocol import AttemptResult, Store

LEASE = timedelta(seconds=30)
ALL_SHARDS = range(1024)
BACKLOG = 40


def _lost(claimed: Execution, status: ExecutionStatus, retry_at: object = None) -> AttemptResult:
    assert claimed.fencing_token is not None
    return AttemptResult(
        claimed.execution_id,
        claimed.fencing_token,
        AttemptStatus.ABANDONED,
        status,
        error={"kind": "lost", "message": "lease expired"},
        next_attempt_at=retry_at,  # type: ignore[arg-type]
        lease_expired_only=True,
    )


def _failed(claimed: Execution, retry_at: object) -> AttemptResult:
    assert claimed.fencing_token is not None
    return AttemptResult(
        claimed.execution_id,
        claimed.fencing_token,
        AttemptStatus.FAILED,
        ExecutionStatus.RETRY_WAIT,
        error={"kind": "error", "message": "boom"},
        next_attempt_at=retry_at,  # type: ignore[arg-type]
    )


async def _get(store: Store, execution_id: uuid.UUID) -> Execution:
    got = await store.execution_get("acme", execution_id)
    assert got is not None
    return got


@pytest.mark.parametrize("how", ["lease lost", "retryable failure"])
async def test_a_due_retry_is_claimed_before_a_newer_ready_backlog(store: Store, how: str) -> None:
    first = new_execution()
    other = new_execution(now=T0 + timedelta(seconds=0.5))  # its retry will not be due yet
    await store.execution_insert_many([first, other])
    claimed, other_claimed = await store.execution_claim_ready("w1", 2, LEASE, T0)
    assert [claimed.execution_id, other_claimed.execution_id] == [
        first.execution_id,
        other.execution_id,
    ]
    # While they run, a backlog of newer executions becomes READY (each a second apart).
    backlog = [new_execution(now=T0 + timedelta(seconds=1 + i)) for i in range(BACKLOG)]
    await store.execution_insert_many(backlog)

    ended = T0 + LEASE + timedelta(seconds=1)
    due = ended + timedelta(seconds=2)
    if how == "lease lost":
        reaped = await store.execution_reap(
            [
                _lost(claimed, ExecutionStatus.RETRY_WAIT, due),
                _lost(other_claimed, ExecutionStatus.RETRY_WAIT, due + timedelta(hours=1)),
            ],
            ended,
        )
        assert sorted(reaped) == sorted([first.execution_id, other.execution_id])
    else:
        accepted = await store.attempt_finish_many(
            [_failed(claimed, due), _failed(other_claimed, due + timedelta(hours=1))], ended
        )
        assert accepted == [True, True]

    promotion = await store.execution_promote_due(ALL_SHARDS, 100, due)
    assert set(promotion.moved) == {first.execution_id}
    assert (await _get(store, other.execution_id)).status is ExecutionStatus.RETRY_WAIT
    retried = await _get(store, first.execution_id)
    assert retried.status is ExecutionStatus.READY and retried.next_attempt_at is None
    assert retried.ready_at == T0  # its place: when it first became READY

    batch = await store.execution_claim_ready("w3", 5, LEASE, due)
    assert first.execution_id in [e.execution_id for e in batch]
    assert batch[0].execution_id == first.execution_id
    assert batch[0].attempt_count == 2


async def test_a_released_execution_keeps_its_place(store: Store) -> None:
    first = new_execution()
    await store.execution_insert_many([first])
    [claimed] = await store.execution_claim_ready("w1", 1, LEASE, T0)
    await store.execution_insert_many(
        [new_execution(now=T0 + timedelta(seconds=1 + i)) for i in range(BACKLOG)]
    )
    assert claimed.fencing_token is not None
    released_at = T0 + timedelta(seconds=BACKLOG + 5)
    assert await store.execution_release(first.execution_id, claimed.fencing_token, released_at)
    [again] = await store.execution_claim_ready("w2", 1, LEASE, released_at)
    assert again.execution_id == first.execution_id


async def test_a_lost_attempt_that_is_retried_is_given_back_and_counted_apart(
    store: Store,
) -> None:
    items = [new_execution() for _ in range(3)]
    await store.execution_insert_many(items)
    retry, dead, released = await store.execution_claim_ready("w1", 3, LEASE, T0)
    assert released.fencing_token is not None
    assert await store.execution_release(released.execution_id, released.fencing_token, T0)
    later = T0 + LEASE + timedelta(seconds=1)
    reaped = await store.execution_reap(
        [
            _lost(retry, ExecutionStatus.RETRY_WAIT, later + timedelta(seconds=1)),
            _lost(dead, ExecutionStatus.FAILED),
        ],
        later,
    )
    assert sorted(reaped) == sorted([retry.execution_id, dead.execution_id])
    # Retried: the lost attempt does not count against the budget (as a release does not).
    assert (await _get(store, retry.execution_id)).max_attempts == retry.max_attempts + 1
    assert (await _get(store, dead.execution_id)).max_attempts == dead.max_attempts
    ids = [item.execution_id for item in items]
    # A release is not a loss: only the reaper's ABANDONED attempts of kind "lost" count.
    assert await store.attempt_count_lost(ids) == {retry.execution_id: 1, dead.execution_id: 1}
    assert await store.attempt_count_lost([]) == {}

    # Lost twice: the count grows with each reaped attempt.
    promoted_at = later + timedelta(seconds=1)
    await store.execution_promote_due(ALL_SHARDS, 100, promoted_at)
    claimed = await store.execution_claim_ready("w2", 5, LEASE, promoted_at)
    assert {e.execution_id for e in claimed} == {retry.execution_id, released.execution_id}
    [second] = [e for e in claimed if e.execution_id == retry.execution_id]
    again = promoted_at + LEASE + timedelta(seconds=1)
    assert await store.execution_reap([_lost(second, ExecutionStatus.FAILED)], again) == [
        retry.execution_id
    ]
    assert (await store.attempt_count_lost(ids))[retry.execution_id] == 2

    # A replay gives a fresh budget of lost attempts too.
    assert await store.execution_replay("acme", retry.execution_id, 3, again) is not None
    assert retry.execution_id not in await store.attempt_count_lost(ids)
