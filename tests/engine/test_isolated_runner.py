"""``isolation: process`` python jobs (engine/runners/isolated.py): each attempt in a child
process of its own. A job that kills its process fails only its attempt, with the exit code or
signal; a timeout or cancel kills the child; what a handler returns or raises comes back as in
process."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.engine.helpers import context, definition, is_running
from tickwheel.domain.definitions import PythonExecution
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.engine.runners import PythonRunner, RunOutcome, run_attempt
from tickwheel.engine.runners.isolated import run_isolated

JOBS = "tests.engine.isolated_jobs"


def isolated(name: str) -> PythonExecution:
    return PythonExecution(f"{JOBS}:{name}", isolation="process")


async def run(
    name: str, inputs: dict[str, object] | None = None, timeout: float = 5.0, **outputs: str
) -> RunOutcome:
    d = definition(isolated(name), timeout, **outputs)
    return await run_attempt(d, inputs or {}, context(), runners={"python": PythonRunner()})


async def test_the_job_runs_in_another_process_with_its_context() -> None:
    outcome = await run("where", pid="integer", attempt="integer", token="integer")
    assert outcome.ok and outcome.output is not None
    assert outcome.output["pid"] != os.getpid()
    assert (outcome.output["attempt"], outcome.output["token"]) == (2, 41)
    again = await run("async_where", {"delay": 0.01}, pid="integer")
    assert again.ok and again.output is not None and again.output["pid"] != os.getpid()
    assert again.output["pid"] != outcome.output["pid"]  # a process per attempt


async def test_os_exit_fails_the_attempt_with_its_exit_code() -> None:
    outcome = await run("exits", {"code": 3})
    assert (outcome.ok, outcome.kind) == (False, "error")  # retryable, like any failure
    assert "exited with code 3 before it returned" in outcome.message
    assert outcome.detail == {"exitCode": 3, "isolation": "process"}
    assert (await run("exits", {"code": 0})).kind == "error"  # no result is no success


async def test_a_segfault_fails_the_attempt_naming_the_signal() -> None:
    outcome = await run("segfaults")
    assert (outcome.ok, outcome.kind) == (False, "error")
    assert "killed by SIGSEGV" in outcome.message
    assert outcome.detail == {"signal": "SIGSEGV", "isolation": "process"}


async def test_errors_come_back_as_in_process() -> None:
    failed = await run("fails")
    assert failed.kind == "error" and failed.message == "ValueError: the ledger is locked"
    assert failed.detail is not None and "ValueError" in failed.detail["traceback"]
    permanent = await run("fails_for_good")
    assert permanent.kind == "permanent" and permanent.message == "the account is closed"
    assert permanent.detail is not None and permanent.detail["details"] == {"account": 7}
    listed = await run("returns_a_list")
    assert listed.kind == "invalid_output" and "returned list" in listed.message


async def test_an_entrypoint_that_does_not_fit_fails_for_good_before_any_process() -> None:
    missing = await run("nowhere")
    assert missing.kind == "permanent" and "no attribute 'nowhere'" in missing.message
    unfit = await run("exits", {"code": 1, "extra": 2})
    assert unfit.kind == "permanent" and "cannot take the inputs" in unfit.message


async def _pid_of(pid_file: Path) -> int:
    for _ in range(500):
        if pid_file.exists() and pid_file.read_text():
            return int(pid_file.read_text())
        await asyncio.sleep(0.01)
    raise AssertionError("the job never started")


async def test_a_timeout_kills_the_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    attempt = asyncio.create_task(
        run("sleeps", {"pid_file": str(pid_file), "seconds": 60}, timeout=1.0)
    )
    pid = await _pid_of(pid_file)
    assert is_running(pid)
    outcome = await attempt
    assert outcome.kind == "timeout"
    assert not is_running(pid)  # killed and reaped: not even a zombie


async def test_a_cancel_kills_the_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    attempt = asyncio.create_task(run("sleeps", {"pid_file": str(pid_file), "seconds": 60}))
    pid = await _pid_of(pid_file)
    attempt.cancel()
    with pytest.raises(asyncio.CancelledError):
        await attempt
    assert not is_running(pid)


async def test_neighbours_finish_while_one_isolated_job_crashes() -> None:
    crash = asyncio.create_task(run("segfaults"))
    healthy = [
        asyncio.create_task(run("async_where", {"delay": 0.2}, pid="integer")) for _ in range(3)
    ]
    assert (await crash).kind == "error"
    assert all(o.ok for o in await asyncio.gather(*healthy))


async def test_the_child_checks_the_entrypoint_against_the_workers_policy_again() -> None:
    """The child resolves the name on its own ``sys.path``: what it imports is judged by the same
    policy, so a worker whose rules do not allow the module runs nothing of it in a child."""
    refused = await run_isolated(f"{JOBS}:where", {}, RunPolicy(python_modules=("billing",)))
    assert (refused.ok, refused.kind) == (False, "permanent")
    assert "refused by the worker's run policy" in refused.message
    stdlib = await run_isolated("os:getpid", {}, RunPolicy(python_modules=("tests",)))
    assert (stdlib.ok, stdlib.kind) == (False, "permanent")
