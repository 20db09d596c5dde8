"""How long an idle worker waits for READY work between claims. While its store hears every
process's signals (PostgreSQL with LISTEN in effect) every way work becomes claimable wakes it,
so it claims at its registry report (every ``report_every`` seconds) or its ``heard_poll``,
whichever comes first, not every ``poll``: one claim a second was most of an idle worker's cost
(docs/scaling.md, "An idle worker's claims while it hears"). A store that may miss signals
(SQLite's, in-process only; PostgreSQL's before LISTEN or after its connection dropped) keeps
the short poll. The waits are recorded, not slept."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import psycopg

from tests.factories import T0
from tickwheel.domain.clock import FakeClock
from tickwheel.engine.worker import Worker
from tickwheel.services.settings import WorkerSettings
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.protocol import Store, Topic

SETTINGS = WorkerSettings(poll=1.0, heard_poll=10.0)


def recorded_waits(store: Store) -> list[float]:
    """The timeouts of the store's READY waits from now on; each ends at once, unsignalled."""
    timeouts: list[float] = []

    async def wait_for(topic: Topic, timeout: float) -> bool:
        if topic is Topic.READY:
            timeouts.append(timeout)
        return False

    store.wait_for = wait_for  # type: ignore[method-assign]
    return timeouts


async def idle_wait(store: Store, settings: WorkerSettings = SETTINGS) -> float:
    """The timeout of an idle worker's wait after its first round (a report and an empty claim)."""
    worker = Worker(store, FakeClock(T0), worker_id="w-idle", settings=settings)
    assert await worker.run_once() == 0
    timeouts = recorded_waits(store)
    await worker.idle(0)
    [timeout] = timeouts
    return timeout


async def test_a_worker_that_hears_every_signal_claims_at_its_report(store: Store) -> None:
    if isinstance(store, PostgresStore):
        assert await store.listen(5) and store.hears_all()
        # The report is due 5 s after the first round's: the wait ends then, not at the poll.
        assert 4.0 < await idle_wait(store) <= 5.0
    else:
        assert not store.hears_all()  # SQLite: another process's writes signal nothing here
        assert await idle_wait(store) == SETTINGS.poll


async def test_heard_poll_bounds_the_wait_and_poll_stays_its_floor(store: Store) -> None:
    if isinstance(store, PostgresStore):
        assert await store.listen(5)
    heard = replace(SETTINGS, heard_poll=2.0)
    assert await idle_wait(store, heard) == (2.0 if store.hears_all() else 1.0)
    slow = replace(SETTINGS, poll=7.0, heard_poll=2.0)  # a long poll chosen on purpose stays
    assert await idle_wait(store, slow) == 7.0


async def test_a_worker_polls_again_once_its_listener_drops(store: Store, pg_url: str) -> None:
    """The drop wakes the waiting worker (its long wait ends) and, until LISTEN is back, it
    waits no longer than its poll."""
    if not isinstance(store, PostgresStore):
        return  # SQLite never hears other processes: the first test holds it to its poll
    assert await store.listen(5)
    worker = Worker(store, FakeClock(T0), worker_id="w-drop", settings=SETTINGS)
    assert await worker.run_once() == 0
    waiting = asyncio.ensure_future(worker.idle(0))
    await asyncio.sleep(0.05)
    assert not waiting.done()  # a long wait: the store hears
    with psycopg.connect(pg_url, autocommit=True) as conn:
        [(killed,)] = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND starts_with(query, 'LISTEN')"
        ).fetchall()
    assert killed >= 1
    await asyncio.wait_for(waiting, 5)  # woken by the drop, long before its 5 s
    # Not back yet: the listener retries after a backoff of half a second.
    assert not store.hears_all()
    timeouts = recorded_waits(store)
    await worker.idle(0)
    assert timeouts == [SETTINGS.poll]
