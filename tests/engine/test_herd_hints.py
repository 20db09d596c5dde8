"""A herd inserted inside the scheduler's loaded window, in many commits: each commit's due hints
name the shards it wrote at the herd's instant, and a sliver reads every row of its shard at that
instant. Loaded at each hint, the herd was read again at every commit (20,000 in 20 commits:
~140,000 rows read, the scheduler's CPU with them); now a shard whose rows at that instant the
wheel holds already is read again once, halfway to the instant, whatever the hints meanwhile,
and each row counts once towards the instant (docs/scaling.md, "A herd inserted inside the
window")."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta

import pytest

from tests.engine.test_wheel_scheduler import scheduler, status
from tests.factories import T0, definition, new_execution
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.states import ExecutionStatus
from tickwheel.engine.scheduler import Scheduler
from tickwheel.engine.wheel_window import HINT_AT_ONCE
from tickwheel.store.due import DueEntry, DueSlice
from tickwheel.store.protocol import Store


@pytest.fixture(autouse=True)
async def listening(store: Store) -> None:
    listen = getattr(store, "listen", None)
    if listen is not None:
        assert await listen(5)


def count_reads(store: Store) -> list[int]:
    """Rows the scheduler's loads read, counted as they come back."""
    read = [0]
    original = store.execution_due_window

    async def counting(slices: Sequence[DueSlice], batch: int) -> list[list[DueEntry]]:
        pages = await original(slices, batch)
        read[0] += sum(len(page) for page in pages)
        return pages

    store.execution_due_window = counting  # type: ignore[method-assign]
    return read


async def insert_herd(
    store: Store, clock: FakeClock, s: Scheduler, ahead: float, commits: int, each: int
) -> list[uuid.UUID]:
    """``commits`` inserts of ``each`` rows due ``ahead`` seconds after T0, a round after each."""
    d = definition("greet")
    ids: list[uuid.UUID] = []
    for _ in range(commits):
        items = [
            new_execution(execute_in=ahead, now=T0, d=d, key=uuid.uuid4().hex) for _ in range(each)
        ]
        ids += [o.execution.execution_id for o in await store.execution_insert_many(items)]
        clock.advance(0.1)
        await s.run_once()
    return ids


async def test_a_herd_inserted_in_many_commits_is_read_about_once(store: Store) -> None:
    clock = FakeClock(T0)
    s = scheduler(store, clock)
    await s.run_once()  # the window [T0, T0 + 30 s] is loaded, empty
    read = count_reads(store)
    ids = await insert_herd(store, clock, s, 20, commits=10, each=1000)
    at = T0 + timedelta(seconds=20)
    while clock.now() < at - HINT_AT_ONCE:  # the rounds until the instant, 0.5 s apart
        clock.advance(0.5)
        await s.run_once()
    assert s.wheel is not None and all(i in s.wheel for i in ids)
    assert read[0] <= 1.2 * len(ids)  # the old code: 3.8 times
    assert s._instants.count(at) == len(ids)  # each row once, not once per read
    clock.set(at)
    assert await s.run_once() == len(ids)
    assert {await status(store, i) for i in ids[:: len(ids) // 50]} == {ExecutionStatus.READY}


async def test_a_late_insert_into_a_held_shard_still_fires_at_its_instant(store: Store) -> None:
    """The row's shard holds rows at its instant: its hint waits for the marker halfway, which
    reads it before the instant; one inserted within ``HINT_AT_ONCE`` is read at once."""
    clock = FakeClock(T0)
    s = scheduler(store, clock)
    await s.run_once()
    d = definition("greet")
    first = [new_execution(execute_in=10, now=T0, d=d, key=uuid.uuid4().hex) for _ in range(400)]
    stored = await store.execution_insert_many(first)
    clock.advance(1)
    await s.run_once()
    held = {o.execution.shard_id for o in stored}
    at = T0 + timedelta(seconds=10)

    async def one_in_a_held_shard() -> uuid.UUID:
        while True:
            [o] = await store.execution_insert_many(
                [new_execution(execute_in=10, now=T0, d=d, key=uuid.uuid4().hex)]
            )
            if o.execution.shard_id in held:
                return o.execution.execution_id
            await store.execution_cancel("acme", o.execution.execution_id, clock.now())

    late = await one_in_a_held_shard()
    await s.run_once()
    assert s.wheel is not None and late not in s.wheel  # its load waits: T0 + 5.5 s
    clock.set(T0 + timedelta(seconds=5.5))
    await s.run_once()
    assert late in s.wheel
    clock.set(at - HINT_AT_ONCE / 2)
    later = await one_in_a_held_shard()
    await s.run_once()
    assert later in s.wheel  # near the instant: read at once
    clock.set(at)
    assert await s.run_once() == 402
    assert await status(store, late) is ExecutionStatus.READY
    assert await status(store, later) is ExecutionStatus.READY
