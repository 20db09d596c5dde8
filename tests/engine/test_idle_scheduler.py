"""A leased scheduler with nothing to do, on the fake clock, on both backends: what its rounds
ask of the store. Its leases are renewed every third of a lease; the catch-all and the window's
extension keep their own period (a third of the window), as docs/scaling.md says they do. Both
ran at every renewal too, and with the catch-all's lock and rewrite of every lease row they were
most of what an idle scheduler cost (docs/scaling.md, "What an idle scheduler costs"). It asks
for its next retry when the last answer has run out or a DUE signal came, not every second."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from tests.factories import T0, new_execution
from tests.store.test_retry_order import LEASE, _failed
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.domain.states import ExecutionStatus
from tickwheel.engine.scheduler import Scheduler
from tickwheel.store.protocol import Store

COUNTED = (
    "shard_lease_renew",
    "execution_promote_due_leased",
    "execution_due_window",
    "execution_next_retry_at",
)


def count_calls(store: Store, calls: Counter[str], names: tuple[str, ...] = COUNTED) -> None:
    """Counts the calls of ``names`` made on ``store`` from now on (they still run)."""
    for name in names:
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


async def test_an_idle_scheduler_asks_for_its_next_retry_once_a_window_period(
    store: Store,
) -> None:
    clock, scheduler = await alone(store)
    calls: Counter[str] = Counter()
    count_calls(store, calls)
    seconds = 30
    for _ in range(seconds):  # an idle scheduler's rounds: one a second (max_sleep)
        clock.advance(scheduler.max_sleep)
        await scheduler.run_once()
    period = scheduler.refresh_every.total_seconds()
    # At every round before: 30.
    assert calls["execution_next_retry_at"] <= seconds / period + 1, calls


async def retry_in(store: Store, clock: FakeClock, seconds: float) -> uuid.UUID:
    """An execution claimed and failed now, its retry ``seconds`` ahead (RETRY_WAIT)."""
    item = new_execution(now=clock.now())
    await store.execution_insert_many([item])
    [claimed] = await store.execution_claim_ready("w", 1, LEASE, clock.now())
    retry_at = clock.now() + timedelta(seconds=seconds)
    assert await store.attempt_finish(_failed(claimed, retry_at), clock.now())
    return item.execution_id


async def status(store: Store, execution_id: uuid.UUID) -> ExecutionStatus:
    got = await store.execution_get("acme", execution_id)
    assert got is not None
    return got.status


async def test_a_retry_stored_after_the_question_is_promoted_at_its_time(store: Store) -> None:
    """The failure signals DUE (in this process here; by NOTIFY from another one): the next
    round asks again, and the retry is promoted at its instant, not at the next period."""
    clock, scheduler = await alone(store)
    clock.advance(1)
    await scheduler.run_once()  # asked: nothing within the period
    execution_id = await retry_in(store, clock, 2)
    await scheduler.run_once()
    clock.advance(1.999)
    await scheduler.run_once()
    assert await status(store, execution_id) is ExecutionStatus.RETRY_WAIT
    clock.advance(0.001)
    await scheduler.run_once()
    assert await status(store, execution_id) is ExecutionStatus.READY


async def test_a_retry_whose_signal_was_lost_is_promoted_within_a_period(store: Store) -> None:
    """Deaf to the signal (a notification lost with its connection): the question of the next
    period finds the retry, and the round at its instant promotes it."""
    clock, scheduler = await alone(store)
    hints = scheduler._hints
    scheduler._hints = None
    execution_id = await retry_in(store, clock, 1)
    end = clock.now() + scheduler.refresh_every + timedelta(seconds=1)
    while clock.now() < end:
        clock.advance(scheduler.max_sleep)
        await scheduler.run_once()
    scheduler._hints = hints
    assert await status(store, execution_id) is ExecutionStatus.READY
