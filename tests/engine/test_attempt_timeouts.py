"""Attempts' time limits kept by one timer per loop (``engine/runners/timeouts.py``), with the
semantics of ``asyncio.timeout``: each attempt ends as "timeout" at its own limit, whatever the
limits of the others; a cancel from elsewhere (a shutdown, a lost lease) still propagates, also
when it meets the limit; a runner that ignores the cancel and returns late is a timeout too; a
runner's own TimeoutError before the limit is the runner's failure; nothing is kept once the
attempts are over."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.engine.helpers import context, definition
from tickwheel.domain.definitions import Definition, PythonExecution
from tickwheel.engine.runners import JobContext, RunOutcome, run_attempt
from tickwheel.engine.runners.timeouts import timeouts

NOOP = PythonExecution("tests.engine.jobs_for_tests:add")


class Sleeper:
    """Sleeps the number of seconds in the inputs, then succeeds; notes how it ended."""

    def __init__(self, *, ignore_cancel: bool = False) -> None:
        self.ignore_cancel = ignore_cancel
        self.cancelled = 0

    async def run(self, d: Definition, inputs: dict[str, Any], ctx: JobContext) -> RunOutcome:
        try:
            await asyncio.sleep(inputs["seconds"])
        except asyncio.CancelledError:
            self.cancelled += 1
            if not self.ignore_cancel:
                raise
            await asyncio.sleep(inputs["seconds"] / 4)  # hangs on a while, then returns
        return RunOutcome(ok=True, output={})


async def attempt(runner: Any, limit: float, seconds: float) -> tuple[RunOutcome, float]:
    began = time.monotonic()
    outcome = await run_attempt(
        definition(NOOP, limit), {"seconds": seconds}, context(), runners={"python": runner}
    )
    return outcome, time.monotonic() - began


async def test_each_attempt_ends_at_its_own_limit_whatever_the_others_limits() -> None:
    runner = Sleeper()
    long = asyncio.create_task(attempt(runner, 0.6, 5))
    await asyncio.sleep(0.05)
    short = asyncio.create_task(attempt(runner, 0.15, 5))  # starts later, expires first
    quick = asyncio.create_task(attempt(runner, 0.3, 0.01))  # ends in time
    (s_outcome, s_took), (q_outcome, _), (l_outcome, l_took) = await asyncio.gather(
        short, quick, long
    )
    assert s_outcome.kind == "timeout" and "0.15 s" in s_outcome.message
    assert 0.14 <= s_took < 0.45
    assert q_outcome.ok
    assert l_outcome.kind == "timeout" and 0.59 <= l_took < 1.0
    assert runner.cancelled == 2
    assert len(timeouts()) == 0


async def test_a_runner_that_ignores_the_cancel_and_returns_late_is_a_timeout() -> None:
    runner = Sleeper(ignore_cancel=True)
    outcome, took = await attempt(runner, 0.1, 0.4)
    assert outcome.kind == "timeout" and runner.cancelled == 1
    assert took >= 0.19
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_cancel_from_elsewhere_propagates_also_when_it_meets_the_limit() -> None:
    runner = Sleeper()
    task = asyncio.create_task(attempt(runner, 5, 30))
    await asyncio.sleep(0.05)
    task.cancel()  # a shutdown
    with pytest.raises(asyncio.CancelledError):
        await task

    class Both:
        """At its limit, the attempt's task is cancelled by someone else as well."""

        async def run(self, d: Definition, inputs: dict[str, Any], ctx: JobContext) -> RunOutcome:
            this = asyncio.current_task()
            assert this is not None
            asyncio.get_running_loop().call_later(0.1, this.cancel)
            await asyncio.sleep(30)
            return RunOutcome(ok=True, output={})

    both = asyncio.create_task(attempt(Both(), 0.1, 0))
    with pytest.raises(asyncio.CancelledError):
        await both
    assert len(timeouts()) == 0


async def test_a_runners_own_timeout_error_before_the_limit_is_its_failure() -> None:
    class Raises:
        async def run(self, d: Definition, inputs: dict[str, Any], ctx: JobContext) -> RunOutcome:
            raise TimeoutError("the runner's own")

    outcome, _ = await attempt(Raises(), 5, 0)
    assert outcome.kind == "error" and "TimeoutError: the runner's own" in outcome.message
    assert len(timeouts()) == 0


def test_each_loop_has_its_own_keeper() -> None:
    async def keeper() -> Any:
        outcome = await run_attempt(
            definition(NOOP, 1), {"seconds": 0}, context(), runners={"python": Sleeper()}
        )
        assert outcome.ok
        return timeouts()

    first = asyncio.run(keeper())
    second = asyncio.run(keeper())
    assert first is not second and first.loop is not second.loop
