"""Running work in the store, on both backends: a cancel request on a RUNNING execution, the
heartbeat that carries progress and checkpoint and answers the request, and a snooze that gives
its attempt back to the budget. Every worker write is fenced by its token."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.factories import T0, new_execution
from tickwheel.app.executions import ExecutionService
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.errors import Conflict
from tickwheel.domain.models import Execution, ExecutionEventKind
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.engine.reaper import Reaper
from tickwheel.store.protocol import AttemptResult, Store

LEASE = timedelta(seconds=30)
SOON = T0 + timedelta(seconds=5)


async def running(store: Store) -> Execution:
    item = new_execution()
    await store.execution_insert_many([item])
    [claimed] = await store.execution_claim_ready("w1", 1, LEASE, T0)
    return claimed


async def test_a_cancel_request_marks_only_a_running_execution_and_is_recorded_once(
    store: Store,
) -> None:
    ex = await running(store)
    asked = await store.execution_cancel_request("acme", ex.execution_id, SOON)
    assert asked is not None and asked.status is ExecutionStatus.RUNNING
    assert asked.cancel_requested_at == SOON
    again = await store.execution_cancel_request("acme", ex.execution_id, SOON + LEASE)
    assert again is not None and again.cancel_requested_at == SOON  # the first instant stays
    events = await store.execution_event_list("acme", ex.execution_id)
    assert [(e.kind, e.detail["fromStatus"]) for e in events] == [
        (ExecutionEventKind.CANCEL_REQUESTED, "RUNNING")
    ]
    # Not RUNNING, or another tenant's: nothing written.
    ready = new_execution()
    await store.execution_insert_many([ready])
    assert await store.execution_cancel_request("acme", ready.execution_id, SOON) is None
    assert await store.execution_cancel_request("other", ex.execution_id, SOON) is None
    got = await store.execution_get("acme", ready.execution_id)
    assert got is not None and got.cancel_requested_at is None


async def test_the_heartbeat_writes_progress_and_checkpoint_and_answers_the_request(
    store: Store,
) -> None:
    ex = await running(store)
    token = ex.fencing_token
    assert token is not None
    progress = {"fraction": 0.42, "message": "copied 4,200 rows", "at": SOON.isoformat()}
    beat = await store.execution_beat(
        ex.execution_id, token, LEASE, SOON, progress=progress, checkpoint={"row": 4200}
    )
    assert beat is not None and not beat.cancel_requested
    # None keeps what is stored; the lease moves on with every beat.
    beat = await store.execution_beat(ex.execution_id, token, LEASE, SOON + LEASE)
    got = await store.execution_get("acme", ex.execution_id)
    assert got is not None
    assert (got.progress, got.checkpoint) == (progress, {"row": 4200})
    assert got.lease_expires_at == SOON + 2 * LEASE
    await store.execution_cancel_request("acme", ex.execution_id, SOON)
    beat = await store.execution_beat(ex.execution_id, token, LEASE, SOON + LEASE)
    assert beat is not None and beat.cancel_requested
    # A stale token (a zombie) writes nothing and hears it has lost the execution.
    assert await store.execution_beat(ex.execution_id, token - 1, LEASE, SOON, checkpoint=1) is None
    got = await store.execution_get("acme", ex.execution_id)
    assert got is not None and got.checkpoint == {"row": 4200}


async def test_the_claim_hands_the_checkpoint_to_the_next_attempt(store: Store) -> None:
    ex = await running(store)
    assert ex.fencing_token is not None
    await store.execution_beat(ex.execution_id, ex.fencing_token, LEASE, SOON, checkpoint=[1, 2])
    failed = AttemptResult(
        ex.execution_id,
        ex.fencing_token,
        AttemptStatus.FAILED,
        ExecutionStatus.RETRY_WAIT,
        error={"kind": "error", "message": "boom"},
        next_attempt_at=SOON,
    )
    assert await store.attempt_finish(failed, SOON)
    await store.execution_promote_due(range(1024), 10, SOON + LEASE)
    [again] = await store.execution_claim_ready("w2", 1, LEASE, SOON + LEASE)
    assert again.attempt_count == 2 and again.checkpoint == [1, 2]


async def test_a_snooze_waits_without_burning_an_attempt(store: Store) -> None:
    ex = await running(store)
    token = ex.fencing_token
    assert token is not None
    detail = {"kind": "snoozed", "message": "come back later", "seconds": 60.0}
    assert not await store.execution_snooze(ex.execution_id, token - 1, SOON, detail, T0)
    assert await store.execution_snooze(ex.execution_id, token, SOON + LEASE, detail, SOON)
    got = await store.execution_get("acme", ex.execution_id)
    assert got is not None and got.status is ExecutionStatus.RETRY_WAIT
    assert got.next_attempt_at == SOON + LEASE
    assert (got.attempt_count, got.max_attempts) == (1, ex.max_attempts + 1)
    [attempt] = await store.attempt_list("acme", ex.execution_id)
    assert attempt.status is AttemptStatus.ABANDONED and attempt.error == detail
    assert await store.attempt_count_lost([ex.execution_id]) == {}  # not a lost attempt
    # Twice is not possible: it is no longer RUNNING.
    assert not await store.execution_snooze(ex.execution_id, token, SOON, detail, SOON)


async def test_the_app_cancels_unstarted_at_once_asks_running_and_refuses_finished(
    store: Store,
) -> None:
    service = ExecutionService(store, "acme", FakeClock(SOON))
    ex = await running(store)
    asked = await service.cancel(ex.execution_id)
    assert (asked.status, asked.cancel_requested_at) == (ExecutionStatus.RUNNING, SOON)
    ready = new_execution()
    await store.execution_insert_many([ready])
    assert (await service.cancel(ready.execution_id)).status is ExecutionStatus.CANCELLED
    with pytest.raises(Conflict, match="already finished"):
        await service.cancel(ready.execution_id)


async def test_a_replay_forgets_an_old_cancel_request(store: Store) -> None:
    ex = await running(store)
    assert ex.fencing_token is not None
    await store.execution_cancel_request("acme", ex.execution_id, SOON)
    failed = AttemptResult(
        ex.execution_id,
        ex.fencing_token,
        AttemptStatus.FAILED,
        ExecutionStatus.FAILED,
        error={"kind": "permanent", "message": "no"},
    )
    assert await store.attempt_finish(failed, SOON)
    replayed = await store.execution_replay("acme", ex.execution_id, 2, SOON + LEASE)
    assert replayed is not None and replayed.cancel_requested_at is None


async def test_the_reaper_ends_a_lost_execution_whose_cancel_was_requested(store: Store) -> None:
    ex = await running(store)
    await store.execution_cancel_request("acme", ex.execution_id, SOON)
    clock = FakeClock(T0 + 2 * LEASE)
    assert await Reaper(store, clock).run_once() == 1
    got = await store.execution_get("acme", ex.execution_id)
    assert got is not None and got.status is ExecutionStatus.CANCELLED
    assert got.finished_at == T0 + 2 * LEASE and got.next_attempt_at is None
    assert got.error is not None and "a cancel was requested" in got.error["message"]
    [attempt] = await store.attempt_list("acme", ex.execution_id)
    assert attempt.status is AttemptStatus.ABANDONED
