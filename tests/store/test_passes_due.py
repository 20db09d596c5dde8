"""The two questions an idle system's passes ask instead of running, on both backends:
``flow_passes_due`` (would the breakers' probe or the expiry find anything?) and
``execution_lease_next`` (when does the earliest lease of a RUNNING execution end?). Each answer
must match what its pass would do at that instant, or work would wait for a pass never run."""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.factories import T0, definition, new_execution
from tickwheel.domain.breaker import BreakerConfig
from tickwheel.domain.submission import NewExecution, SubmitRequest, prepare_execution
from tickwheel.store.flow_protocol import DuePasses
from tickwheel.store.protocol import Store

LEASE = timedelta(seconds=30)
GREET = "registry://jobs/greet"
NOTHING = DuePasses(breakers=False, expiry=False)


def limited(*, start_by: datetime | None = None, deadline: datetime | None = None) -> NewExecution:
    request = SubmitRequest(GREET, {"name": "Ada"}, start_by=start_by, deadline=deadline)
    return prepare_execution(request, definition(), "acme", T0)


async def test_the_breakers_are_due_exactly_when_the_probe_would_move_one(store: Store) -> None:
    assert await store.flow_passes_due(T0) == NOTHING
    config = BreakerConfig(consecutive_failures=1, cool_down=10)
    first, second = new_execution(), new_execution()
    await store.execution_insert_many([first, second])
    await store.circuit_breaker_record("acme", GREET, config, first.execution_id, True, T0)
    # OPEN, cooling down: nothing to probe before the 10 s are over.
    assert await store.flow_passes_due(T0 + timedelta(seconds=9)) == NOTHING
    at = T0 + timedelta(seconds=10)
    assert await store.flow_passes_due(at) == DuePasses(breakers=True, expiry=False)
    assert len(await store.circuit_breaker_probe(at)) == 1
    # HALF_OPEN with a probe that can still run: nothing to do.
    assert await store.flow_passes_due(at) == NOTHING
    # Its probe cancelled before it ran: the probe must pick another.
    [pause] = await store.pause_list("acme")
    assert pause.probe_execution_id is not None
    assert await store.execution_cancel("acme", pause.probe_execution_id, at)
    assert (await store.flow_passes_due(at)).breakers
    assert len(await store.circuit_breaker_probe(at)) == 1
    assert await store.flow_passes_due(at) == NOTHING


async def test_expiry_is_due_once_a_start_by_or_a_deadline_has_passed(store: Store) -> None:
    by_start = limited(start_by=T0 + timedelta(seconds=10))
    by_deadline = limited(deadline=T0 + timedelta(seconds=20))
    await store.execution_insert_many([by_start, by_deadline])
    assert await store.flow_passes_due(T0 + timedelta(seconds=10)) == NOTHING  # not before
    at = T0 + timedelta(seconds=11)
    assert await store.flow_passes_due(at) == DuePasses(breakers=False, expiry=True)
    assert len(await store.execution_expire_due(at)) == 1
    assert await store.flow_passes_due(at) == NOTHING
    later = T0 + timedelta(seconds=21)
    assert (await store.flow_passes_due(later)).expiry
    assert len(await store.execution_expire_due(later)) == 1
    assert await store.flow_passes_due(later) == NOTHING


async def test_a_started_execution_is_never_due_for_expiry(store: Store) -> None:
    item = limited(start_by=T0 + timedelta(seconds=10))
    await store.execution_insert_many([item])
    [claimed] = await store.execution_claim_ready("w1", 1, LEASE, T0)
    assert claimed.execution_id == item.execution_id
    assert await store.flow_passes_due(T0 + timedelta(seconds=11)) == NOTHING
    assert await store.execution_expire_due(T0 + timedelta(seconds=11)) == []


async def test_the_next_lease_end_is_the_earliest_running_one(store: Store) -> None:
    assert await store.execution_lease_next(T0) is None  # nothing runs
    await store.execution_insert_many([new_execution(), new_execution()])
    await store.execution_claim_ready("w1", 1, LEASE, T0)
    await store.execution_claim_ready("w2", 1, timedelta(seconds=12), T0 + timedelta(seconds=5))
    assert await store.execution_lease_next(T0) == timedelta(seconds=17)
    assert await store.execution_lease_next(T0 + timedelta(seconds=20)) == timedelta(seconds=-3)
    # What it says has ended, the reaper's read finds.
    expired = await store.execution_lease_expired(10, T0 + timedelta(seconds=20))
    assert [e.lease_owner for e in expired] == ["w2"]
