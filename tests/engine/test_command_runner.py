"""The command runner: stdin, environment, stdout parsing, exit codes, timeouts, caps."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from tests.engine.helpers import (
    EXECUTION_ID,
    RUNNERS,
    TEST_POLICY,
    context,
    definition,
    is_running,
    python_argv,
)
from tickwheel.domain.definitions import CommandExecution
from tickwheel.engine.runners import CommandRunner, RunOutcome, run_attempt
from tickwheel.engine.runners.command import Tail

ECHO = """
import json, os, sys
print("starting")
inputs = json.load(sys.stdin)
keys = ("TICKWHEEL_ATTEMPT", "TICKWHEEL_EXECUTION_ID", "TICKWHEEL_FENCING_TOKEN")
env = {k: os.environ[k] for k in keys if k in os.environ}
print(json.dumps({"inputs": inputs, "env": env, "args": sys.argv[1:]}))
print("[1, 2]")
print("done, not JSON")
"""


def command(*argv: str, timeout: float = 5.0, **outputs: str) -> Any:
    return definition(CommandExecution(argv), timeout, **outputs)


async def test_command_reads_stdin_gets_env_and_its_last_json_line_wins(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    argv = python_argv(ECHO, f"$(touch {marker})", "; rm -rf /", "*")
    d = command(*argv, inputs="object", env="object", args="array")
    outcome = await run_attempt(d, {"day": "2026-03-01"}, context(), runners=RUNNERS)
    assert outcome.ok, outcome
    assert outcome.output == {
        "inputs": {"day": "2026-03-01"},
        "env": {
            "TICKWHEEL_ATTEMPT": "2",
            "TICKWHEEL_EXECUTION_ID": str(EXECUTION_ID),
            "TICKWHEEL_FENCING_TOKEN": "41",
        },
        "args": [f"$(touch {marker})", "; rm -rf /", "*"],  # literal: no shell
    }
    assert not marker.exists()


async def test_command_with_no_json_output_and_unread_stdin_has_no_outputs() -> None:
    outcome = await run_attempt(
        command(*python_argv("print('hi')")), {"x": "y" * 2**20}, context(), runners=RUNNERS
    )
    assert outcome == RunOutcome(ok=True, output={})


async def test_command_non_zero_exit_is_retryable_with_stderr_tail() -> None:
    code = "import sys; sys.stderr.write('x' * 10000 + '\\ndisk full\\n'); sys.exit(3)"
    outcome = await run_attempt(command(*python_argv(code)), {}, context(), runners=RUNNERS)
    assert outcome.kind == "error" and outcome.message.endswith("exited with code 3: disk full")
    assert outcome.detail is not None and outcome.detail["exit_code"] == 3
    tail = outcome.detail["stderr_tail"]
    assert len(tail) == 2048 and tail.endswith("disk full\n")


@pytest.mark.parametrize("program", ["/nonexistent/tw-job", "tw-no-such-program-on-path"])
async def test_command_executable_not_found_is_permanent(program: str) -> None:
    outcome = await run_attempt(command(program), {}, context(), runners=RUNNERS)
    assert (outcome.kind, outcome.message) == ("permanent", f"executable not found: {program!r}")


async def _started_group(tmp_path: Path) -> tuple[int, int]:
    """The pids of the sleeper's shell and of the ``sleep`` it started, once both are written
    (a bounded poll: a loaded machine once took more than 2 s to start the shell)."""
    deadline = time.monotonic() + 20
    while not ((tmp_path / "child").exists() and (tmp_path / "parent").exists()):
        assert time.monotonic() < deadline, "the sleeper did not start its child within 20 s"
        await asyncio.sleep(0.02)
    return int((tmp_path / "parent").read_text()), int((tmp_path / "child").read_text())


def sleeper(tmp_path: Path, timeout: float = 5.0) -> Any:
    script = f"sleep 30 & echo $! > {tmp_path}/child.tmp; mv {tmp_path}/child.tmp {tmp_path}/child"
    return command("sh", "-c", f"echo $$ > {tmp_path}/parent; {script}; wait", timeout=timeout)


async def test_command_timeout_kills_the_process_group(tmp_path: Path) -> None:
    started = time.monotonic()
    task = asyncio.ensure_future(
        run_attempt(sleeper(tmp_path, 2.0), {}, context(), runners=RUNNERS)
    )
    parent, child = await _started_group(tmp_path)
    outcome = await task
    # Long before the 30 s sleep would end; the timeout leaves the shell 2 s to start its child
    # (0.4 s was once too short on a loaded machine, and the group died before it).
    assert outcome.kind == "timeout" and time.monotonic() - started < 15
    assert not Path(f"/proc/{parent}").exists()  # killed and reaped: no zombie
    assert not is_running(child)  # the shell's child died with its group


async def test_cancelling_a_command_kills_it_and_propagates(tmp_path: Path) -> None:
    task = asyncio.ensure_future(run_attempt(sleeper(tmp_path), {}, context(), runners=RUNNERS))
    parent, child = await _started_group(tmp_path)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not Path(f"/proc/{parent}").exists() and not is_running(child)


async def test_command_stdout_is_capped_and_the_json_line_is_found_in_the_tail() -> None:
    chatty = "import sys\nfor i in range(50000): print('log line', i)\n"
    runner = {"command": CommandRunner(stdout_limit=64 * 1024, policy=TEST_POLICY)}
    d = command(*python_argv(chatty + "print('{\"n\": 1}')"), n="integer")
    assert (await run_attempt(d, {}, context(), runners=runner)).output == {"n": 1}
    outcome = await run_attempt(command(*python_argv(chatty)), {}, context(), runners=runner)
    assert outcome.kind == "invalid_output" and "no JSON object line" in outcome.message
    assert outcome.detail is not None and outcome.detail["stdout_bytes"] > 500_000


def test_tail_keeps_memory_bounded() -> None:
    tail = Tail(1000)
    for _ in range(1000):
        tail.add(b"x" * 999)
        assert len(tail._buffer) <= 2000
    tail.add(b"end")
    assert tail.truncated and tail.total == 999_003 and tail.data() == b"x" * 997 + b"end"
