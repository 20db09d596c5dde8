"""Deadlines in the store, on both backends: executions that never started by their startBy
(or their deadline) end EXPIRED with an ``expired`` history event; started ones, other tenants'
limits and executions still in time are left alone; the worker's fenced expiry of an execution
it claimed too late."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from tests.factories import T0, definition
from tickwheel.domain.models import ExecutionEventKind
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.domain.submission import NewExecution, SubmitRequest, prepare_execution
from tickwheel.store.protocol import Store

LEASE = timedelta(seconds=30)


def limited(
    start_by: datetime | None = None,
    deadline: datetime | None = None,
    execute_in: float | None = None,
) -> NewExecution:
    request = SubmitRequest(
        "registry://jobs/greet",
        {"name": "Ada"},
        execute_at=T0 + timedelta(seconds=execute_in) if execute_in else None,
        start_by=start_by,
        deadline=deadline,
    )
    return prepare_execution(request, definition(), "acme", T0)


async def test_unstarted_executions_past_their_limit_end_expired(store: Store) -> None:
    ready = limited(start_by=T0 + timedelta(seconds=10))
    scheduled = limited(deadline=T0 + timedelta(seconds=20), execute_in=5)
    in_time = limited(start_by=T0 + timedelta(hours=1))
    unlimited = limited()
    await store.execution_insert_many([ready, scheduled, in_time, unlimited])
    assert await store.execution_expire_due(T0 + timedelta(seconds=10)) == []  # not yet past
    expired = await store.execution_expire_due(T0 + timedelta(seconds=21))
    assert {e.execution_id for e in expired} == {ready.execution_id, scheduled.execution_id}
    for e in expired:
        assert e.status is ExecutionStatus.EXPIRED and e.finished_at == T0 + timedelta(seconds=21)
        assert e.error is not None and e.error["kind"] == "expired"
    got = await store.execution_get("acme", ready.execution_id)
    assert got is not None and got.status is ExecutionStatus.EXPIRED
    assert got.error is not None and got.error["message"] == "not started by its startBy"
    assert got.start_by == T0 + timedelta(seconds=10)
    events = await store.execution_event_list("acme", scheduled.execution_id)
    assert [(e.kind, e.detail["fromStatus"]) for e in events] == [
        (ExecutionEventKind.EXPIRED, "SCHEDULED")
    ]
    for kept in (in_time, unlimited):
        row = await store.execution_get("acme", kept.execution_id)
        assert row is not None and row.status is ExecutionStatus.READY
    assert await store.execution_expire_due(T0 + timedelta(seconds=30)) == []  # once


async def test_a_started_execution_never_expires(store: Store) -> None:
    item = limited(start_by=T0 + timedelta(seconds=10))
    await store.execution_insert_many([item])
    [claimed] = await store.execution_claim_ready("w1", 1, LEASE, T0)
    assert claimed.start_by == T0 + timedelta(seconds=10)
    assert await store.execution_expire_due(T0 + timedelta(minutes=5)) == []


async def test_the_worker_expires_what_it_claimed_too_late_under_its_token(store: Store) -> None:
    item = limited(start_by=T0 + timedelta(seconds=10))
    await store.execution_insert_many([item])
    late = T0 + timedelta(seconds=11)
    [claimed] = await store.execution_claim_ready("w1", 1, LEASE, late)
    assert claimed.started_at == late
    token = claimed.fencing_token
    assert token is not None
    error: dict[str, Any] = {"kind": "expired", "message": "claimed after its startBy"}
    assert not await store.execution_expire_claimed(item.execution_id, token + 1, error, late)
    assert await store.execution_expire_claimed(item.execution_id, token, error, late)
    assert not await store.execution_expire_claimed(item.execution_id, token, error, late)
    got = await store.execution_get("acme", item.execution_id)
    assert got is not None and got.status is ExecutionStatus.EXPIRED and got.error == error
    assert got.finished_at == late and got.lease_owner is None
    [attempt] = await store.attempt_list("acme", item.execution_id)
    assert attempt.status is AttemptStatus.ABANDONED and attempt.error == error
    [event] = await store.execution_event_list("acme", item.execution_id)
    assert event.kind is ExecutionEventKind.EXPIRED
    assert not await store.execution_expire_claimed(uuid.uuid4(), token, error, late)


async def test_expired_executions_are_counted_as_finished_and_pruned(store: Store) -> None:
    item = limited(start_by=T0 + timedelta(seconds=10))
    await store.execution_insert_many([item])
    await store.execution_expire_due(T0 + timedelta(seconds=11))
    counts = await store.execution_count_by_status(T0)
    assert counts[ExecutionStatus.EXPIRED] == 1 and counts[ExecutionStatus.READY] == 0
    assert await store.execution_prune(T0 + timedelta(seconds=11), 100) == 0  # not before
    assert await store.execution_prune(T0 + timedelta(days=1), 100) == 1
    assert await store.execution_get("acme", item.execution_id) is None
