"""A herd's emptied shards close at every grace (docs/scaling.md, "Emptied shards closed at every
grace"), on both backends, on the fake clock: a leased scheduler asks, at each grace of a herd it
opened, to close the herd's shards the claims have emptied, while the others stay open for the
claims and the herd gets another grace; a closed shard is not asked again, the final close asks
only for the rest, and a shard opened again since by a later herd stays open. The count and the
close are one call, one statement on PostgreSQL (docs/scaling.md, "A herd's grace in one
statement")."""

from __future__ import annotations

import inspect
import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Any

from tests.engine.test_direct_scheduler import LEASE, SECOND, scheduler
from tests.engine.test_wheel_scheduler import listening, status
from tests.factories import T0, definition, new_execution
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.states import ExecutionStatus
from tickwheel.engine.herds import GRACE_SAMPLE
from tickwheel.engine.scheduler import DIRECT_GRACE, Scheduler
from tickwheel.store.protocol import Store

__all__ = ["listening"]  # the fixture, used by every test here

Closes = list[tuple[list[int], list[int]]]


async def rows(store: Store, shard: int, name: str, n: int = 1, at: float = 5) -> list[uuid.UUID]:
    """``n`` executions of the definition ``name``, due at T0 + ``at`` s, all in ``shard``: a
    claim naming the definition empties exactly that shard."""
    items = [
        replace(
            new_execution(execute_in=at, d=definition(name), key=uuid.uuid4().hex), shard_id=shard
        )
        for _ in range(n)
    ]
    await store.execution_insert_many(items)
    return [i.execution_id for i in items]


def spy_closes(s: Scheduler) -> Closes:
    """Every grace check of ``s`` (``shard_lease_grace``): the shards asked, the shards the
    database closed."""
    closes: Closes = []
    real = s.store.shard_lease_grace

    async def shard_lease_grace(*args: Any, **kwargs: Any) -> tuple[int, list[int]]:
        left, closed = await real(*args, **kwargs)
        closes.append(([lease.shard_id for lease in args[1]], closed))
        return left, closed

    s.store.shard_lease_grace = shard_lease_grace  # type: ignore[method-assign]
    return closes


def spy_calls(s: Scheduler) -> list[str]:
    """The names of the store's coroutine methods ``s`` calls from now on, in order (each of
    those a grace check calls is one statement on PostgreSQL)."""
    calls: list[str] = []
    real = s.store

    class Counting:
        def __getattr__(self, name: str) -> Any:
            attr = getattr(real, name)
            if not inspect.iscoroutinefunction(attr):
                return attr

            async def call(*args: Any, **kwargs: Any) -> Any:
                calls.append(name)
                return await attr(*args, **kwargs)

            return call

    s.store = Counting()  # type: ignore[assignment]
    return calls


async def claim(store: Store, name: str, at: timedelta, n: int = 9) -> list[uuid.UUID]:
    """What a worker of the definition ``name`` claims at T0 + ``at`` (``n`` at most)."""
    uri = [f"registry://jobs/{name}"]
    got = await store.execution_claim_ready("w", n, LEASE, T0 + at, uri)
    return [e.execution_id for e in got]


async def test_the_shards_the_claims_emptied_close_at_the_next_grace(store: Store) -> None:
    clock = FakeClock(T0)
    s = scheduler(store, clock, leased=True, owner="a")
    s.direct_min = 2  # the herd opens; a late row alone is promoted
    await s.run_once()  # alone: takes every shard
    emptied = await rows(store, 7, "greet", 2)
    drained = await rows(store, 8, "other", 2)
    await s.run_once()  # the hints: into the wheel
    closes = spy_closes(s)
    clock.set(T0 + 5 * SECOND)
    assert await s.run_once() == 0  # opened, nothing promoted
    # The claims empty shard 7 and take one of shard 8's rows.
    assert set(await claim(store, "greet", 5 * SECOND)) == set(emptied)
    [taken] = await claim(store, "other", 5 * SECOND, 1)
    # At the grace: shard 7 closes; shard 8 is still being drained and stays open.
    clock.set(T0 + 5 * SECOND + DIRECT_GRACE)
    assert await s.run_once() == 0
    assert closes == [([7, 8], [7])]
    [left] = set(drained) - {taken}
    assert await status(store, left) is ExecutionStatus.SCHEDULED
    late = await rows(store, 7, "greet")  # due at the herd's instant, in the closed shard
    assert await claim(store, "greet", 6 * SECOND) == []
    assert await status(store, late[0]) is ExecutionStatus.SCHEDULED
    assert await claim(store, "other", 6 * SECOND) == [left]  # still open: taken as it is
    # The next grace asks only for shard 8, now emptied: it closes, and the herd is done.
    clock.set(T0 + 5 * SECOND + 2 * DIRECT_GRACE)
    closes.clear()
    await s.run_once()
    assert closes == [([8], [8])] and s._deferred == []
    [late_8] = await rows(store, 8, "other")
    assert await claim(store, "other", 7 * SECOND) == []
    assert await status(store, late_8) is ExecutionStatus.SCHEDULED


async def test_the_final_close_asks_only_for_the_shards_still_open(store: Store) -> None:
    clock = FakeClock(T0)
    s = scheduler(store, clock, leased=True, owner="a")
    await s.run_once()
    emptied = await rows(store, 7, "greet")
    stuck = await rows(store, 8, "other", 2)  # no worker of "other": promoted after a grace
    kept = await rows(store, 9, "third", 2)
    await s.run_once()
    closes = spy_closes(s)
    clock.set(T0 + 5 * SECOND)
    await s.run_once()
    assert await claim(store, "greet", 5 * SECOND) == emptied
    assert len(await claim(store, "third", 5 * SECOND, 1)) == 1
    clock.set(T0 + 5 * SECOND + DIRECT_GRACE)
    assert await s.run_once() == 0  # progress: another grace
    assert closes == [([7, 8, 9], [7])]
    # A grace with none taken (its check closes nothing: both still hold rows): what is left
    # is promoted, then the rest of the shards close.
    clock.set(T0 + 5 * SECOND + 2 * DIRECT_GRACE)
    closes.clear()
    assert await s.run_once() == 3
    assert closes == [([8, 9], []), ([8, 9], [8, 9])] and s._deferred == []
    assert {await status(store, i) for i in stuck} == {ExecutionStatus.READY}
    assert ExecutionStatus.READY in {await status(store, i) for i in kept}


async def test_a_shard_opened_again_by_a_later_herd_stays_open(store: Store) -> None:
    clock = FakeClock(T0)
    s = scheduler(store, clock, leased=True, owner="a")
    await s.run_once()
    first = await rows(store, 7, "greet", 2)
    emptied = await rows(store, 8, "other")
    later = await rows(store, 8, "third", at=5.5)  # a later herd, in shard 8 only
    await s.run_once()
    closes = spy_closes(s)
    clock.set(T0 + 5 * SECOND)
    await s.run_once()
    assert await claim(store, "other", 5 * SECOND) == emptied  # shard 8 emptied of the first
    assert len(await claim(store, "greet", 5 * SECOND)) == 2
    clock.set(T0 + 5.5 * SECOND)
    await s.run_once()  # the later herd opens shard 8 again, through T0 + 5.5 s
    # The first herd's grace: shard 7 closes; shard 8, opened since, stays open.
    clock.set(T0 + 5 * SECOND + DIRECT_GRACE)
    await s.run_once()
    assert closes == [([7, 8], [7])]
    [claimed] = await store.execution_claim_ready(
        "w", 9, LEASE, T0 + 6 * SECOND, ["registry://jobs/third"]
    )
    assert claimed.execution_id == later[0] and claimed.ready_at == T0 + 5.5 * SECOND
    assert {await status(store, i) for i in first} == {ExecutionStatus.RUNNING}


async def test_a_grace_check_is_one_store_call(store: Store) -> None:
    """The count of a herd's rows left and the close of its emptied shards were two statements
    at every grace (``execution_count_due``, then ``shard_lease_close``); now one. A herd over
    shards 7 and 8: the claims empty 7 and take one row of 8, then the rest."""
    clock = FakeClock(T0)
    s = scheduler(store, clock, leased=True, owner="a")
    s.direct_min = 2
    await s.run_once()
    await rows(store, 7, "greet", 2)
    await rows(store, 8, "other", 2)
    await s.run_once()
    clock.set(T0 + 5 * SECOND)
    await s.run_once()  # opened
    assert len(await claim(store, "greet", 5 * SECOND)) == 2
    assert len(await claim(store, "other", 5 * SECOND, 1)) == 1
    calls = spy_calls(s)
    await s._promote_deferred(T0 + 5 * SECOND + DIRECT_GRACE)  # drained: another grace
    assert calls == ["shard_lease_grace"] and len(s._deferred) == 1
    assert len(await claim(store, "other", 6 * SECOND)) == 1
    calls.clear()
    await s._promote_deferred(T0 + 5 * SECOND + 2 * DIRECT_GRACE)  # done: the rest closes
    assert calls == ["shard_lease_grace"] and s._deferred == []


async def test_a_grace_counts_a_sample_and_the_whole_herd_only_when_it_shows_no_progress(
    store: Store,
) -> None:
    """A herd over more shards than ``GRACE_SAMPLE``: a grace counts the rows of the lowest
    ones and only probes the others (docs/scaling.md, "A herd's grace counts a sample"). When
    the sample shows no progress the whole herd is counted, and what is left is promoted only
    when that count shows none either, as when every grace counted the whole herd."""
    clock = FakeClock(T0)
    s = scheduler(store, clock, leased=True, owner="a")
    s.direct_min = 2
    await s.run_once()
    shards = range(GRACE_SAMPLE + 4)
    herd = {shard: await rows(store, shard, f"d{shard}", 2) for shard in shards}
    await s.run_once()
    counted: list[set[int] | None] = []
    real = s.store.shard_lease_grace

    async def shard_lease_grace(*args: Any, **kwargs: Any) -> tuple[int, list[int]]:
        asked = kwargs["counted"]
        counted.append(None if asked is None else set(asked))
        result: tuple[int, list[int]] = await real(*args, **kwargs)
        return result

    s.store.shard_lease_grace = shard_lease_grace  # type: ignore[method-assign]
    clock.set(T0 + 5 * SECOND)
    assert await s.run_once() == 0  # opened
    sample = set(range(GRACE_SAMPLE))
    # A row of the sample taken: the sample alone shows the progress.
    assert len(await claim(store, "d3", 5 * SECOND, 1)) == 1
    clock.set(T0 + 5 * SECOND + DIRECT_GRACE)
    assert await s.run_once() == 0
    assert counted == [sample]
    # A row taken outside the sample only: the whole count shows it, another grace.
    assert len(await claim(store, f"d{GRACE_SAMPLE + 2}", 6 * SECOND, 1)) == 1
    counted.clear()
    clock.set(T0 + 5 * SECOND + 2 * DIRECT_GRACE)
    assert await s.run_once() == 0
    assert counted == [sample, None]
    # Nothing taken: neither shows progress, and what is left is promoted.
    counted.clear()
    clock.set(T0 + 5 * SECOND + 3 * DIRECT_GRACE)
    assert await s.run_once() == 2 * len(shards) - 2
    assert counted[:2] == [set(range(GRACE_SAMPLE)), None]
    ready = {await status(store, i) for ids in herd.values() for i in ids}
    assert ready == {ExecutionStatus.READY, ExecutionStatus.RUNNING}
