"""The one service base (``tickwheel.services.base``) that the engine's services, the Cron
Service and the orchestrator share: the loop, the store's clock, owner ids and the back-off on
database outages. Driven by a fake clock: a pause advances it instead of sleeping."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sqlite3
from collections.abc import Iterator

import psycopg
import pytest

from tickwheel.domain.clock import FakeClock, SystemClock
from tickwheel.domain.errors import Conflict, Unavailable
from tickwheel.services.base import Service, is_database_error, new_owner


class Scripted(Service):
    """A service whose rounds follow a script: a number is the round's work, an exception is
    raised. It stops when the script runs out; its pauses advance the fake clock."""

    name = "scripted"

    def __init__(self, script: list[int | Exception], clock: FakeClock) -> None:
        super().__init__(clock)
        self.fake = clock
        self.script: Iterator[int | Exception] = iter(script)
        self.pauses: list[float] = []
        self.random.seed(7)

    async def run_once(self) -> int:
        step = next(self.script, None)
        if step is None:
            self.stop()
            return 0
        if isinstance(step, Exception):
            raise step
        return step

    async def pause(self, seconds: float) -> None:
        self.pauses.append(seconds)
        await self.fake.sleep(seconds)


async def run(service: Service) -> None:
    await asyncio.wait_for(service.run(), 5)  # a bound on a broken loop, never a wait on time


async def test_run_once_is_one_round_and_run_repeats_it_until_stopped() -> None:
    service = Scripted([3, 0, 2], FakeClock())
    assert await service.run_once() == 3  # a test drives one round on its own
    await run(service)
    assert service.stopping
    # Work done: go on at once; nothing done: wait the default second.
    assert service.pauses[:2] == [1.0, 0.0]
    assert service.rounds == 3  # the last one found the script empty and stopped


async def test_an_outage_backs_off_exponentially_with_jitter_up_to_the_cap() -> None:
    clock = FakeClock()
    start = clock.now()
    service = Scripted([Unavailable("database restarting")] * 8 + [1], clock)
    service.backoff_base, service.backoff_cap = 1.0, 30.0
    await run(service)
    backoffs = service.pauses[:8]
    bases = [1, 2, 4, 8, 16, 30, 30, 30]
    for seconds, base in zip(backoffs, bases, strict=True):
        assert 0.8 * base <= seconds <= min(30.0, 1.2 * base)
    assert len(set(backoffs)) == len(backoffs)  # jittered: no two instances retry in step
    assert service.failures == 0  # the round that worked ended the outage
    assert (clock.now() - start).total_seconds() == pytest.approx(sum(service.pauses))


async def test_an_outage_never_spins_and_never_kills_the_loop() -> None:
    service = Scripted([Unavailable("down")] * 50 + [1], FakeClock())
    service.backoff_base = 0.001  # even a tiny base pauses every failed round
    await run(service)
    assert service.rounds == 52  # 50 failed, one worked, one found the script empty
    assert len(service.pauses) >= 50 and all(p > 0 for p in service.pauses[:50])


async def test_an_outage_is_logged_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    service = Scripted([Unavailable("down")] * 5 + [1], FakeClock())
    with caplog.at_level(logging.INFO, logger="tickwheel.scripted"):
        await run(service)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "unavailable" in warnings[0].getMessage() and "down" in warnings[0].getMessage()
    assert any("back after 5 failed rounds" in r.getMessage() for r in caplog.records)


async def test_a_new_outage_after_recovery_is_logged_again_from_the_base_delay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    service = Scripted([Unavailable("a"), Unavailable("a"), 1, Unavailable("b"), 1], FakeClock())
    with caplog.at_level(logging.WARNING, logger="tickwheel.scripted"):
        await run(service)
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 2
    # After the recovery the back-off starts over: the fourth pause is near the base again.
    assert service.pauses[3] <= 1.2


@pytest.mark.parametrize(
    "error",
    [
        Unavailable("pool timed out"),
        sqlite3.OperationalError("database is locked"),
        psycopg.OperationalError("connection refused"),
        psycopg.errors.AdminShutdown("terminating connection"),
        psycopg.InterfaceError("the connection is closed"),
    ],
)
def test_the_stores_and_the_drivers_outage_errors_are_database_errors(error: Exception) -> None:
    assert is_database_error(error)


@pytest.mark.parametrize("error", [ValueError("bug"), Conflict("taken"), KeyError("x")])
def test_other_errors_are_not_database_errors(error: Exception) -> None:
    assert not is_database_error(error)


async def test_another_failure_is_logged_each_time_and_retried_at_the_usual_pace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    service = Scripted([ValueError("bad row"), ValueError("bad row"), 1], FakeClock())
    with caplog.at_level(logging.ERROR, logger="tickwheel.scripted"):
        await run(service)
    assert service.pauses[:2] == [1.0, 1.0]  # no back-off: not an outage
    assert len([r for r in caplog.records if "round failed" in r.getMessage()]) == 2
    assert service.failures == 0


async def test_stop_ends_a_long_back_off_at_once() -> None:
    class Down(Service):
        async def run_once(self) -> int:
            raise Unavailable("down")

    service = Down(FakeClock())
    service.backoff_base = service.backoff_cap = 3600.0
    task = asyncio.create_task(service.run())
    await asyncio.wait_for(service.wait_rounds(1), 5)  # in its hour-long back-off now
    service.stop()
    await asyncio.wait_for(task, 5)  # the real pause returns as soon as stop() is called
    assert service.failures == 1


async def test_cancelling_the_loop_is_not_a_failure() -> None:
    class Hangs(Service):
        async def run_once(self) -> int:
            await asyncio.Event().wait()
            return 0

    service = Hangs(FakeClock())
    task = asyncio.create_task(service.run())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert service.rounds == 0 and service.failures == 0


async def test_wait_rounds_is_a_signal_a_test_can_wait_on() -> None:
    service = Scripted([1, 1, 1, 0], FakeClock())
    waiter = asyncio.create_task(service.wait_rounds(3))
    await run(service)
    await asyncio.wait_for(waiter, 5)
    assert service.rounds >= 3


def test_the_store_clock_is_the_databases_in_production_and_the_fake_in_tests() -> None:
    clock = FakeClock()
    assert Scripted([], clock).store_now() == clock.now()

    class Real(Service):
        pass

    assert Real(SystemClock()).store_now() is None
    assert Real().store_now() is None


def test_owner_ids_name_the_host_and_process_and_differ_per_instance() -> None:
    first, second = new_owner(), new_owner()
    assert first != second
    assert first.startswith(f"{socket.gethostname()}-{os.getpid()}-")
    assert Scripted([], FakeClock()).owner != Scripted([], FakeClock()).owner

    class Named(Service):
        pass

    assert Named(owner="node-a").owner == "node-a"
