"""The passes any one scheduler may run for all (the breakers' probe, startBy's expiry, the
reaper) run in one process of several: the holder of shard 0 (``Scheduler.runs_passes``). Every
process ran each of them every second before. When that holder stops, the next holder of shard 0
runs them. Idle, the holder asks once a second whether the probe or the expiry has work and runs
neither, and the reaper sleeps until the earliest lease ends (at most ``max_wait``) instead of
asking every second. Both backends, the fake clock."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from tests.engine.test_idle_scheduler import count_calls
from tests.factories import T0, definition, new_execution
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import SubmitRequest, prepare_execution
from tickwheel.engine.reaper import Reaper
from tickwheel.engine.scheduler import PASSES_SHARD, Scheduler
from tickwheel.store.protocol import Store

PASSES = ("flow_passes_due",)  # the holder's one question a second: are the passes due?
GREET = "registry://jobs/greet"
RUN = ("circuit_breaker_probe", "execution_expire_due")


async def split(store: Store, clock: FakeClock) -> tuple[Scheduler, Scheduler]:
    """Two leased schedulers with half the shards each: (the holder of shard 0, the other)."""
    a, b = (Scheduler(store, clock, leased=True, owner=o) for o in ("a", "b"))
    await a.run_once()
    await b.run_once()
    clock.advance(a.renew_every.total_seconds())
    await a.run_once()
    await b.run_once()
    assert len(a.leases) == len(b.leases) == 512
    return (a, b) if PASSES_SHARD in a.leases else (b, a)


async def test_one_of_two_schedulers_runs_the_passes_and_the_next_holder_takes_over(
    store: Store,
) -> None:
    clock = FakeClock(T0)
    holder, other = await split(store, clock)
    assert holder.runs_passes and not other.runs_passes
    calls: Counter[str] = Counter()
    count_calls(store, calls, PASSES)
    for _ in range(10):  # ten seconds of both schedulers' rounds
        clock.advance(1)
        await holder.run_once()
        await other.run_once()
    assert calls == Counter(dict.fromkeys(PASSES, 10)), calls  # 20 each before
    # The holder stops (killed, frozen): past its leases the other takes shard 0 and the passes.
    calls.clear()
    for _ in range(int(holder.lease_ttl.total_seconds()) + 5):
        clock.advance(1)
        await other.run_once()
    assert other.runs_passes
    assert calls["flow_passes_due"] >= 1


async def test_a_reaper_beside_a_scheduler_reaps_only_while_it_runs_the_passes(
    store: Store,
) -> None:
    clock = FakeClock(T0)
    item = new_execution()
    await store.execution_insert_many([item])
    [claimed] = await store.execution_claim_ready("dead", 1, timedelta(seconds=30), T0)
    holder, other = await split(store, clock)
    reapers = {}
    for scheduler in (holder, other):
        # As server/in_process.py wires it.
        reaper = Reaper(store, clock, runs=lambda s=scheduler: s.runs_passes)
        reapers[scheduler.owner] = reaper
    clock.advance(31)  # the dead worker's lease is over
    assert await reapers[other.owner].run_once() == 0
    got = await store.execution_get("acme", claimed.execution_id)
    assert got is not None and got.status is ExecutionStatus.RUNNING
    assert await reapers[holder.owner].run_once() == 1
    got = await store.execution_get("acme", claimed.execution_id)
    assert got is not None and got.status is ExecutionStatus.RETRY_WAIT


async def test_an_idle_holder_runs_no_pass_until_one_has_work(store: Store) -> None:
    clock = FakeClock(T0)
    holder, _ = await split(store, clock)
    calls: Counter[str] = Counter()
    count_calls(store, calls, PASSES + RUN)
    for _ in range(10):
        clock.advance(1)
        await holder.run_once()
    assert calls == Counter({"flow_passes_due": 10}), calls  # each pass ran 10 times before
    # An execution past its startBy: the next round's question finds it, and the expiry runs.
    request = SubmitRequest(GREET, {"name": "Ada"}, start_by=clock.now() + timedelta(seconds=1))
    item = prepare_execution(request, definition(), "acme", clock.now())
    await store.execution_insert_many([item])
    clock.advance(2)
    await holder.run_once()
    assert calls["execution_expire_due"] == 1 and calls["circuit_breaker_probe"] == 0
    got = await store.execution_get("acme", item.execution_id)
    assert got is not None and got.status is ExecutionStatus.EXPIRED


class Pausing(Reaper):
    """A reaper that records the pauses its idle asks for instead of sleeping."""

    paused: list[float]

    async def pause(self, seconds: float) -> None:
        self.paused.append(seconds)


async def test_the_reaper_sleeps_until_the_earliest_lease_ends(store: Store) -> None:
    clock = FakeClock(T0)
    reaper = Pausing(store, clock)
    reaper.paused = []
    calls: Counter[str] = Counter()
    count_calls(store, calls, ("execution_lease_next", "execution_lease_expired"))

    async def round_after(seconds: float) -> float:
        clock.advance(seconds)
        did = await reaper.run_once()
        await reaper.idle(did)
        return reaper.paused[-1]

    assert await round_after(0) == reaper.max_wait == 5.0  # nothing runs
    assert calls == Counter({"execution_lease_next": 1}), calls  # no read of expired leases
    await store.execution_insert_many([new_execution()])
    await store.execution_claim_ready("dead", 1, timedelta(seconds=30), clock.now())
    assert await round_after(0) == 5.0  # 30 s away: asked again within max_wait
    assert await round_after(27) == 3.0  # then slept until it ends
    assert await round_after(2.5) == reaper.interval  # never less than the interval
    assert calls["execution_lease_expired"] == 0
    clock.advance(1)
    assert await reaper.run_once() == 1  # the dead worker's lease, reaped on time
    assert calls["execution_lease_expired"] == 1
