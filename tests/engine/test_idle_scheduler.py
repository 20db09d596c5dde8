"""A leased scheduler with nothing to do, on the fake clock, on both backends: what its rounds
ask of the store. Its leases are renewed every third of a lease; the catch-all and the window's
extension keep their own period (a third of the window), as docs/scaling.md says they do. Both
ran at every renewal too, and with the catch-all's lock and rewrite of every lease row they were
most of what an idle scheduler cost (docs/scaling.md, "What an idle scheduler costs")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from tests.factories import T0, new_execution
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.domain.states import ExecutionStatus
from tickwheel.engine.scheduler import Scheduler
from tickwheel.store.protocol import Store

COUNTED = ("shard_lease_renew", "execution_promote_due_leased", "execution_due_window")


def count_calls(store: Store, calls: Counter[str]) -> None:
    """Counts the calls of ``COUNTED`` made on ``store`` from now on (they still run)."""
    for name in COUNTED:
        method: Callable[..., Awaitable[Any]] = getattr(store, name)

        async def counted(*args: Any, _name: str = name, _method: Any = method, **kw: Any) -> Any:
            calls[_name] += 1
            return await _method(*args, **kw)

        setattr(store, name, counted)


async def alone(store: Store) -> tuple[FakeClock, Scheduler]:
    """A leased scheduler after its first round, holding every shard."""
    clock = FakeClock(T0)
    scheduler = Scheduler(store, clock, leased=True, owner="a")
    await scheduler.run_once()
    assert len(scheduler.leases) == SHARD_COUNT
    return clock, scheduler


async def test_an_idle_scheduler_sweeps_and_extends_its_window_at_their_own_period(
    store: Store,
) -> None:
    clock, scheduler = await alone(store)
    calls: Counter[str] = Counter()
    count_calls(store, calls)
    renewals = 9  # 30 s of a lease renewed every 3.3 s; the window (30 s) is extended every 10 s
    for _ in range(renewals):
        clock.advance(scheduler.renew_every.total_seconds())
        await scheduler.run_once()
    assert calls["shard_lease_renew"] == renewals
    sweeps, loads = calls["execution_promote_due_leased"], calls["execution_due_window"]
    assert sweeps == loads and 2 <= sweeps <= 3, calls  # at every renewal before: 9 each


async def test_a_row_due_without_a_hint_is_promoted_by_the_next_catch_all(store: Store) -> None:
    """Nothing told the scheduler (a row stored while its hints were not listened to): the
    catch-all of its next refresh promotes it, whatever the renewals did meanwhile."""
    clock, scheduler = await alone(store)
    hints = scheduler._hints
    scheduler._hints = None  # deaf: the row below reaches it only through the catch-all
    [item] = [new_execution(execute_in=1, key="unhinted")]
    await store.execution_insert_many([item])
    while clock.now() < T0 + scheduler.refresh_every:
        clock.advance(scheduler.renew_every.total_seconds())
        await scheduler.run_once()
    scheduler._hints = hints
    got = await store.execution_get("acme", item.execution_id)
    assert got is not None and got.status is ExecutionStatus.READY
