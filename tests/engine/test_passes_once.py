"""The passes any one scheduler may run for all (the breakers' probe, startBy's expiry, the
reaper) run in one process of several: the holder of shard 0 (``Scheduler.runs_passes``). Every
process ran each of them every second before. When that holder stops, the next holder of shard 0
runs them. Both backends, the fake clock."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from tests.engine.test_idle_scheduler import count_calls
from tests.factories import T0, new_execution
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.states import ExecutionStatus
from tickwheel.engine.reaper import Reaper
from tickwheel.engine.scheduler import PASSES_SHARD, Scheduler
from tickwheel.store.protocol import Store

PASSES = ("circuit_breaker_probe", "execution_expire_due")


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
    assert calls["circuit_breaker_probe"] >= 1 and calls["execution_expire_due"] >= 1


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
