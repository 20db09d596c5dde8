"""What a leased scheduler reads at an opened herd's instant, on both backends, on the fake
clock (docs/scaling.md, "The herd's drain against a plain drain"): with no pause and no rate
limit anywhere its direct promotion is sent only the rows under a concurrency limit, the rest
left to the claims without a read; with a pause or a rate limit anywhere, the whole herd, so
that the rows those hold back are READY at their instant as before."""

from __future__ import annotations

import uuid
from typing import Any

from tests.engine.test_direct_scheduler import SECOND, scheduler
from tests.engine.test_wheel_scheduler import insert, listening, status
from tests.factories import T0
from tests.store.test_concurrency import KEYED
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.rate_limits import RateLimitSpec
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import SubmitRequest, prepare_execution
from tickwheel.engine.scheduler import Scheduler
from tickwheel.store.protocol import Store

__all__ = ["listening"]  # the fixture, used by every test here

GREET = "registry://jobs/greet"


def spy_promoted(s: Scheduler) -> list[list[uuid.UUID]]:
    """The ids of each direct promotion ``s`` sends from now on (``direct=True``)."""
    sent: list[list[uuid.UUID]] = []
    real = s.store.execution_promote_ids_leased

    async def promote(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("direct"):
            sent.append(list(args[2]))
        return await real(*args, **kwargs)

    s.store.execution_promote_ids_leased = promote  # type: ignore[method-assign]
    return sent


async def herd(store: Store, clock: FakeClock) -> tuple[Scheduler, list[uuid.UUID]]:
    """A scheduler holding every shard, and four rows of ``greet`` due at T0 + 5 s in its
    wheel."""
    s = scheduler(store, clock, leased=True, owner="a")
    await s.run_once()  # alone: takes every shard
    ids = await insert(store, clock, 5, 5, 5, 5)
    await s.run_once()  # the hints: into the wheel
    return s, ids


async def test_a_herd_under_no_flow_control_is_left_to_the_claims_unread(store: Store) -> None:
    clock = FakeClock(T0)
    s, ids = await herd(store, clock)
    sent = spy_promoted(s)
    clock.set(T0 + 5 * SECOND)
    assert await s.run_once() == 0
    assert sent == []  # the old code read all four by primary key to promote none
    assert {await status(store, i) for i in ids} == {ExecutionStatus.SCHEDULED}
    assert len(s._deferred) == 1 and sorted(s._deferred[0].ids) == sorted(ids)
    claimed = await store.execution_claim_ready("w", 9, SECOND * 30, clock.now())
    assert sorted(e.execution_id for e in claimed) == sorted(ids)


async def test_only_the_rows_under_a_concurrency_limit_are_sent(store: Store) -> None:
    clock = FakeClock(T0)
    s = scheduler(store, clock, leased=True, owner="a")
    await s.run_once()
    request = SubmitRequest(
        definition_uri="registry://jobs/sync", inputs={"customer": "c1"}, execute_at=T0 + 5 * SECOND
    )
    limited = prepare_execution(request, KEYED, "acme", T0)
    plain = await insert(store, clock, 5, 5)
    await store.execution_insert_many([limited])
    await s.run_once()
    sent = spy_promoted(s)
    clock.set(T0 + 5 * SECOND)
    assert await s.run_once() == 1
    assert sent == [[limited.execution_id]]
    assert await status(store, limited.execution_id) is ExecutionStatus.READY
    assert {await status(store, i) for i in plain} == {ExecutionStatus.SCHEDULED}


async def test_with_a_pause_anywhere_the_paused_rows_are_ready_at_their_instant(
    store: Store,
) -> None:
    clock = FakeClock(T0)
    s, ids = await herd(store, clock)
    other = await insert(store, clock, 5, name="other")
    await s.run_once()
    await store.pause_set("acme", GREET, "maintenance", T0)
    sent = spy_promoted(s)
    clock.set(T0 + 5 * SECOND)
    assert await s.run_once() == 4
    assert sorted(i for batch in sent for i in batch) == sorted(ids + other)  # all read
    assert {await status(store, i) for i in ids} == {ExecutionStatus.READY}
    assert await status(store, other[0]) is ExecutionStatus.SCHEDULED  # the claims' own


async def test_with_a_rate_limit_anywhere_the_limited_rows_are_ready_at_their_instant(
    store: Store,
) -> None:
    clock = FakeClock(T0)
    s, ids = await herd(store, clock)
    await store.rate_limit_set("acme", GREET, RateLimitSpec(1, 60.0), 1, T0)
    clock.set(T0 + 5 * SECOND)
    assert await s.run_once() == 4
    assert {await status(store, i) for i in ids} == {ExecutionStatus.READY}
