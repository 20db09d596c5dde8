"""The scheduler's timing wheel on both backends, on the fake clock: executions of the loaded
window fire at their instant by id, executions inserted inside the window arrive as due hints
and fire at their instant (not at the next load; loaded when the hint comes, so that the instant
costs only its promotions, the first of them small), a full page continues when its last row comes
due, lost hints are made up by the catch-all, shards given up leave the wheel, and promotions
are counted per definition (and fenced ones counted as such)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import timedelta

import pytest

from tests.factories import T0, definition, new_execution, stored
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.domain.states import ExecutionStatus
from tickwheel.engine.scheduler import ARM_LEAD, CLAIM_HOLD, PROMOTE_LANES, Scheduler
from tickwheel.observability.metrics import Metrics
from tickwheel.services.settings import SchedulerSettings
from tickwheel.store.due import DueSlice
from tickwheel.store.protocol import Store, Topic


def scheduler(store: Store, clock: FakeClock, **options: object) -> Scheduler:
    s = Scheduler(store, clock, **options)  # type: ignore[arg-type]
    s.metrics = Metrics()
    return s


@pytest.fixture(autouse=True)
async def listening(store: Store) -> None:
    """On PostgreSQL, LISTEN in effect before the schedulers subscribe: a listener that comes up
    later tells them they may have missed hints, and they would rebuild at a random round."""
    listen = getattr(store, "listen", None)
    if listen is not None:
        assert await listen(5)


async def insert(
    store: Store, clock: FakeClock, *delays: float, name: str = "greet"
) -> list[uuid.UUID]:
    d = definition(name)
    items = [
        new_execution(execute_in=delay, now=clock.now(), d=d, key=uuid.uuid4().hex)
        for delay in delays
    ]
    return [o.execution.execution_id for o in await store.execution_insert_many(items)]


def shards_in_wheel(s: Scheduler) -> set[int]:
    assert s.wheel is not None
    return {shard for shard, keys in s._keys.items() for key in keys if key in s.wheel}


async def status(store: Store, execution_id: uuid.UUID) -> ExecutionStatus:
    got = await store.execution_get("acme", execution_id)
    assert got is not None
    return got.status


async def test_the_loaded_window_fires_each_execution_at_its_instant(store: Store) -> None:
    clock = FakeClock(T0)
    [early, late, beyond] = await insert(store, clock, 5, 12.5, 45)
    s = scheduler(store, clock)
    assert await s.run_once() == 0
    assert s.wheel is not None and len(s.wheel) == 2  # the window is 30 s: not the third
    assert s.loaded_until == T0 + timedelta(seconds=30)
    clock.advance(5 - 1e-6)
    assert await s.run_once() == 0
    assert await s.sleep_seconds() == pytest.approx(1e-6, abs=1e-9)
    clock.advance(1e-6)
    assert await s.run_once() == 1
    assert await status(store, early) is ExecutionStatus.READY
    # The window was extended at 10 s (a third of it): the third one is loaded now.
    clock.set(T0 + timedelta(seconds=12.5))
    assert await s.run_once() == 1
    assert s.loaded_until == T0 + timedelta(seconds=42.5) and len(s.wheel) == 0
    assert await status(store, late) is ExecutionStatus.READY
    clock.set(T0 + timedelta(seconds=22.5))
    await s.run_once()
    assert len(s.wheel) == 1 and s.loaded_until == T0 + timedelta(seconds=52.5)
    clock.set(T0 + timedelta(seconds=45))
    assert await s.run_once() == 1
    assert await status(store, beyond) is ExecutionStatus.READY


async def test_an_execution_inserted_inside_the_window_fires_at_its_time(store: Store) -> None:
    clock = FakeClock(T0)
    s = scheduler(store, clock)
    await s.run_once()  # the window [T0, T0 + 30 s] is loaded, empty
    clock.advance(1)
    [eid] = await insert(store, clock, 2)  # due at T0 + 3 s, long before the next load
    assert await s.run_once() == 0  # the hint's sliver is loaded: the id waits in the wheel
    assert s.wheel is not None and eid in s.wheel
    assert s.wheel.next_due() == T0 + timedelta(seconds=3)
    clock.advance(2)
    assert s._next_refresh is not None and clock.now() < s._next_refresh  # no load this round
    assert await s.run_once() == 1
    got = await store.execution_get("acme", eid)
    assert got is not None and got.status is ExecutionStatus.READY
    assert got.ready_at == T0 + timedelta(seconds=3)


async def test_a_lost_hint_is_made_up_by_the_next_load(store: Store) -> None:
    clock = FakeClock(T0)
    s = scheduler(store, clock)
    await s.run_once()
    [eid] = await insert(store, clock, 2)
    assert s._hints is not None
    s._hints.take()  # as if the notification never arrived
    clock.advance(2)
    assert await s.run_once() == 0  # the wheel does not know it
    clock.advance(8)  # the window's extension runs the catch-all first
    assert await s.run_once() == 1
    assert await status(store, eid) is ExecutionStatus.READY


async def test_a_full_page_continues_when_its_last_row_comes_due(store: Store) -> None:
    clock = FakeClock(T0)
    items = [
        replace(new_execution(execute_in=1 + i / 10, key=f"p{i}"), shard_id=7) for i in range(7)
    ]
    ids = [o.execution.execution_id for o in await store.execution_insert_many(items)]
    s = scheduler(store, clock, shards=[7], settings=SchedulerSettings(batch=3))
    await s.run_once()
    assert s.wheel is not None and len(s.wheel) == 4  # a page of 3, and its continuation
    for i in range(7):
        clock.set(T0 + timedelta(seconds=1 + i / 10))
        assert await s.run_once() == 1, f"execution {i} was not promoted at its instant"
        assert await status(store, ids[i]) is ExecutionStatus.READY
    assert len(s.wheel) == 0


async def test_shards_given_up_leave_the_wheel(store: Store) -> None:
    clock = FakeClock(T0)
    a = scheduler(store, clock, leased=True, owner="a")
    await a.run_once()  # alone: takes every shard
    ids = await insert(store, clock, *[5 + i / 10 for i in range(10)])
    clock.advance(1)
    await a.run_once()
    shard_of = {i: (await store.execution_get("acme", i)).shard_id for i in ids}  # type: ignore[union-attr]
    assert shards_in_wheel(a) == set(shard_of.values())  # hinted: loaded into their shards
    b = scheduler(store, clock, leased=True, owner="b")
    await b.run_once()  # a member, holding nothing yet
    clock.advance(a.renew_every.total_seconds())
    await a.run_once()  # gives up the upper half, and their executions leave its wheel
    await b.run_once()  # takes them, and loads their window
    kept = {s for s in shard_of.values() if s in a.leases}
    assert kept and shards_in_wheel(a) == kept
    assert shards_in_wheel(b) == set(shard_of.values()) - kept  # loaded from the database
    clock.set(T0 + timedelta(seconds=6))  # within both leases
    await a.run_once()
    await b.run_once()
    assert (a.promoted + b.promoted, a.fenced_shards, b.fenced_shards) == (10, 0, 0)


async def test_a_lost_lease_fences_the_wheel_and_is_counted(store: Store) -> None:
    clock = FakeClock(T0)
    a = scheduler(store, clock, leased=True, owner="a")
    await a.run_once()
    ids = await insert(store, clock, *[20 + i / 10 for i in range(10)])
    clock.advance(1)
    await a.run_once()
    clock.advance(20)  # paused past its lease: the wheel fires with grants the database refuses
    await a.run_once()
    assert (a.fenced_shards, a.refused) == (SHARD_COUNT, 10)
    assert a.metrics.value("tickwheel_promotion_fenced_shards_total") == SHARD_COUNT
    assert a.metrics.value("tickwheel_promotion_fenced_executions_total") == 10
    # Alone, it then takes every shard again (new epochs) and promotes under those.
    assert len(a.leases) == SHARD_COUNT and a.promoted == 10
    assert all([await status(store, i) is ExecutionStatus.READY for i in ids])


async def test_promotions_are_counted_per_definition(store: Store) -> None:
    for name in ("greet", "bill"):
        assert await store.definition_insert(stored(definition(name)))
    clock = FakeClock(T0)
    s = scheduler(store, clock)
    await insert(store, clock, 1, 1, 1, name="bill")  # loaded with the window
    await s.run_once()
    await insert(store, clock, 2, 2, name="greet")  # hinted
    await insert(store, clock, 40, name="greet")  # beyond the window: a later load
    clock.advance(2)
    assert await s.run_once() == 5
    clock.advance(40)
    assert await s.run_once() == 1
    value = s.metrics.value
    assert value("tickwheel_executions_promoted_total", definition="bill") == 3
    assert value("tickwheel_executions_promoted_total", definition="greet") == 3


async def test_a_hinted_herd_is_loaded_ahead_and_promoted_first_in_a_small_batch(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hinted executions are read when their hints come, not at their instant: at the instant
    the scheduler loads nothing and promotes at once, a small batch first (it commits, and the
    workers wake, before the larger batches are written)."""
    clock = FakeClock(T0)
    s = scheduler(store, clock, settings=SchedulerSettings(batch=100))
    await s.run_once()  # the window is loaded, empty
    ids = await insert(store, clock, *[5.0] * 250)  # one instant, inside the window
    await s.run_once()
    assert s.wheel is not None and all(i in s.wheel for i in ids)
    loads: list[int] = []
    batches: list[int] = []
    window, promote = store.execution_due_window, store.execution_promote_ids

    async def counted_window(slices, limit):  # type: ignore[no-untyped-def]
        loads.append(len(slices))
        return await window(slices, limit)

    async def counted_promote(execution_ids, shards, now=None):  # type: ignore[no-untyped-def]
        batches.append(len(execution_ids))
        return await promote(execution_ids, shards, now)

    monkeypatch.setattr(store, "execution_due_window", counted_window)
    monkeypatch.setattr(store, "execution_promote_ids", counted_promote)
    clock.advance(5)
    assert await s.run_once() == 250
    assert loads == [] and batches == [8, 32, 100, 100, 10]
    assert all([await status(store, i) is ExecutionStatus.READY for i in ids])


# -- arming: the next instant taken out of the wheel shortly before it ---------------------------


def counting_promotions(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[list[uuid.UUID]]:
    batches: list[list[uuid.UUID]] = []
    promote = store.execution_promote_ids

    async def counted(execution_ids, shards, now=None):  # type: ignore[no-untyped-def]
        batches.append(list(execution_ids))
        return await promote(execution_ids, shards, now)

    monkeypatch.setattr(store, "execution_promote_ids", counted)
    return batches


async def test_an_armed_instant_is_promoted_at_its_instant_not_before(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Armed 30 ms ahead, the instant's entries leave the wheel at once, and the rounds before
    the instant promote nothing; the round at the instant promotes them, small batch first."""
    clock = FakeClock(T0)
    s = scheduler(store, clock)
    await s.run_once()
    ids = await insert(store, clock, *[5.0] * 40)
    await s.run_once()
    batches = counting_promotions(store, monkeypatch)
    clock.set(T0 + timedelta(seconds=5) - ARM_LEAD - timedelta(milliseconds=1))
    assert s.arm(clock.now()) == 0  # not yet within ARM_LEAD
    clock.set(T0 + timedelta(seconds=5) - timedelta(milliseconds=30))
    assert s.arm(clock.now()) == 40
    assert s.wheel is not None and len(s.wheel) == 0
    assert await s.sleep_seconds() == pytest.approx(0.03)
    assert s.arm(clock.now()) == 0  # one instant at a time
    clock.set(T0 + timedelta(seconds=5) - timedelta(microseconds=1))
    assert await s.run_once() == 0 and batches == []
    assert all([await status(store, i) is ExecutionStatus.SCHEDULED for i in ids])
    clock.advance(1e-6)
    assert await s.run_once() == 40
    assert [len(b) for b in batches] == [8, 32] and s._armed is None
    assert all([await status(store, i) is ExecutionStatus.READY for i in ids])


async def test_arming_takes_only_the_next_instant_and_later_inserts_keep_theirs(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An execution due before the armed instant, inserted after arming, still fires at its own
    instant; one of the armed instant that a later hint reads again is promoted once."""
    clock = FakeClock(T0)
    s = scheduler(store, clock)
    await s.run_once()
    [first] = await insert(store, clock, 5.0)
    [second] = await insert(store, clock, 5.01)
    await s.run_once()
    clock.set(T0 + timedelta(seconds=5) - timedelta(milliseconds=20))
    assert s.arm(clock.now()) == 1  # the earliest instant only
    assert s.wheel is not None and second in s.wheel
    batches = counting_promotions(store, monkeypatch)
    [between] = await insert(store, clock, 0.01)  # due 10 ms before the armed instant
    [again] = await insert(store, clock, 0.02)  # the armed instant (a hint of its sliver)
    await s.run_once()  # both hints' slivers are read
    got = await store.execution_get("acme", first)
    assert got is not None
    at = T0 + timedelta(seconds=5)
    await s._load_slices([DueSlice(got.shard_id, at - timedelta(milliseconds=1), at)])
    assert first not in s.wheel and between in s.wheel and again in s.wheel
    clock.set(T0 + timedelta(seconds=5) - timedelta(milliseconds=10))
    assert await s.run_once() == 1
    assert batches == [[between]]
    clock.set(T0 + timedelta(seconds=5))
    assert await s.run_once() == 2
    assert sorted(batches[1]) == sorted([first]) and batches[2] == [again]
    clock.set(T0 + timedelta(seconds=5.01))
    assert await s.run_once() == 1
    assert batches[3] == [second]
    assert len(batches) == 4


async def test_idle_arms_the_next_instant_before_sleeping_until_it(store: Store) -> None:
    """Idle waits until ARM_LEAD before the instant, arms it, then waits the rest (a fake
    wait_for that moves the fake clock: no real sleep)."""
    clock = FakeClock(T0)
    s = scheduler(store, clock, settings=SchedulerSettings(max_sleep=5.0))
    await s.run_once()
    await insert(store, clock, *[1.0] * 3)
    await s.run_once()
    waits: list[float] = []

    async def wait_for(topic: object, timeout: float) -> bool:
        waits.append(round(timeout, 6))
        clock.advance(timeout)
        return False

    s.store = type("Waiting", (), {"wait_for": staticmethod(wait_for)})()  # type: ignore[assignment]
    await s.idle(0)
    assert waits == [round(1.0 - ARM_LEAD.total_seconds(), 6), ARM_LEAD.total_seconds()]
    assert s._armed is not None and len(s._armed.fire) == 3
    assert clock.now() == T0 + timedelta(seconds=1)


async def test_idle_woken_by_a_hint_before_arming_goes_round_unarmed(store: Store) -> None:
    clock = FakeClock(T0)
    s = scheduler(store, clock, settings=SchedulerSettings(max_sleep=5.0))
    await s.run_once()
    await insert(store, clock, 1.0)
    await s.run_once()

    async def hinted(topic: object, timeout: float) -> bool:
        clock.advance(0.1)
        return True

    s.store = type("Waiting", (), {"wait_for": staticmethod(hinted)})()  # type: ignore[assignment]
    await s.idle(0)
    assert s._armed is None and s.wheel is not None and len(s.wheel) == 1


async def test_shards_given_up_leave_the_armed_instant_too(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock(T0)
    s = scheduler(store, clock)
    await s.run_once()
    ids = await insert(store, clock, *[5.0] * 6)
    await s.run_once()
    clock.set(T0 + timedelta(seconds=5) - timedelta(milliseconds=10))
    assert s.arm(clock.now()) == 6
    got = [await store.execution_get("acme", i) for i in ids]
    shard = got[0].shard_id if got[0] is not None else -1
    s._forget([shard])
    batches = counting_promotions(store, monkeypatch)
    clock.set(T0 + timedelta(seconds=5))
    await s.run_once()
    promoted = {i for b in batches for i in b}
    assert promoted == {g.execution_id for g in got if g is not None and g.shard_id != shard}


async def test_an_instants_batches_after_the_first_go_out_on_two_lanes(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first batch alone (the herd's first start waits on it), then two batches in flight
    at once, each lane taking the next when its last one returns; every row promoted once."""
    clock = FakeClock(T0)
    s = scheduler(store, clock, settings=SchedulerSettings(batch=100))
    await s.run_once()
    ids = await insert(store, clock, *[5.0] * 250)
    await s.run_once()
    promote = store.execution_promote_ids
    in_flight, most, sizes = 0, 0, []

    async def overlapping(execution_ids, shards, now=None):  # type: ignore[no-untyped-def]
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        sizes.append((len(execution_ids), in_flight))
        try:
            for _ in range(3):  # let the other lane start its batch
                await asyncio.sleep(0)
            return await promote(execution_ids, shards, now)
        finally:
            in_flight -= 1

    monkeypatch.setattr(store, "execution_promote_ids", overlapping)
    clock.advance(5)
    assert await s.run_once() == 250
    assert sizes[0] == (8, 1) and most == PROMOTE_LANES
    assert sorted(n for n, _ in sizes) == [8, 10, 32, 100, 100]
    assert all([await status(store, i) is ExecutionStatus.READY for i in ids])


async def test_a_lane_that_fails_fails_the_round_with_its_own_error(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not an ExceptionGroup: the service tells a database outage apart by the exception."""
    clock = FakeClock(T0)
    s = scheduler(store, clock)
    await s.run_once()
    await insert(store, clock, *[5.0] * 50)
    await s.run_once()
    promote = store.execution_promote_ids
    calls = 0

    async def failing(execution_ids, shards, now=None):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        if calls == 2:
            raise ConnectionError("the database went away")
        return await promote(execution_ids, shards, now)

    monkeypatch.setattr(store, "execution_promote_ids", failing)
    clock.advance(5)
    with pytest.raises(ConnectionError):
        await s.run_once()


async def test_a_worker_of_this_process_is_woken_before_the_next_batches_go_out(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scheduler and worker in one process: the first batch's commit wakes the worker in
    process (no NOTIFY round trip), and the scheduler yields to it before it sends the next
    batches, so that the herd's first claim goes out first."""
    clock = FakeClock(T0)
    s = scheduler(store, clock)
    await s.run_once()
    await insert(store, clock, *[5.0] * 200)
    await s.run_once()
    batches = counting_promotions(store, monkeypatch)
    seen: list[int] = []

    async def worker() -> None:
        assert await store.wait_for(Topic.READY, 5)
        seen.append(len(batches))

    waiting = asyncio.create_task(worker())
    for _ in range(3):
        await asyncio.sleep(0)  # the worker waits
    clock.advance(5)
    assert await s.run_once() == 200
    await waiting
    assert seen == [1]


async def test_the_next_batches_wait_for_the_claim_of_a_worker_beside_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the first batch (and the worker's wake-up), the instant's next batches go out
    once the claim of the worker of this process is back, or after CLAIM_HOLD: on two cores
    they took the CPU that claim needed."""
    clock = FakeClock(T0)
    s = scheduler(store, clock)
    await s.run_once()
    await insert(store, clock, *[5.0] * 200)
    await s.run_once()
    batches = counting_promotions(store, monkeypatch)
    held: list[object] = []

    async def claim_back(limit: float) -> None:
        held.append((len(batches), limit))
        for _ in range(5):  # the claim's round trip: nothing else is sent meanwhile
            await asyncio.sleep(0)
        held.append(len(batches))

    s.claim_back = claim_back
    clock.advance(5)
    assert await s.run_once() == 200
    assert held == [(1, CLAIM_HOLD.total_seconds()), 1] and len(batches) > 1
    # A lone batch has no next ones to hold back.
    await insert(store, clock, *[5.0] * 3)
    await s.run_once()
    clock.advance(5)
    held.clear()
    assert await s.run_once() == 3
    assert held == []
