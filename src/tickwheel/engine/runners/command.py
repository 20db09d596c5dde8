"""``command`` executions: run a program (never through a shell) with the inputs as JSON on its
stdin; its outputs are a JSON object on its stdout.

A worker runs commands only when its operator enabled them, and only the executables listed
(``RunPolicy.commands``, ``TICKWHEEL_COMMANDS``; ``argv[0]`` exactly as written); anything else
is a permanent failure. Allowing an interpreter (``python3``, ``sh``) allows any code it is given.

The program inherits this process's environment (less the worker's ``TICKWHEEL_SECRET_*``
secrets) plus ``TICKWHEEL_EXECUTION_ID``, ``TICKWHEEL_ATTEMPT`` and ``TICKWHEEL_FENCING_TOKEN``,
so that its side effects can be idempotent.

Stdout: the LAST non-empty line that parses as a JSON object is the output, so a program may log
to stdout before it prints its result. Lines that are not JSON objects are ignored; a program
that prints none has the output ``{}``. Only the last ``stdout_limit`` bytes (1 MiB) are kept: an
output line must be within them. Stderr is kept as its last ``stderr_limit`` bytes (2 KiB) for
the failure detail. A non-zero exit is a retryable "error"; a missing executable is permanent.

The program leads its own session and process group. When the attempt is cancelled (its timeout
included) the whole group gets SIGKILL, so children it started die with it, and the program is
reaped before the cancellation goes on. When the execution itself is cancelled while it runs
(``DELETE /v1/executions/{id}``), the group gets SIGTERM first and SIGKILL only after the
worker's cancel grace (``--cancel-grace``, 10 s by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections.abc import Sequence
from typing import Any, Final

from tickwheel.domain.definitions import CommandExecution, Definition
from tickwheel.domain.run_policy import RunPolicy, run_problems
from tickwheel.engine.runners.base import JobContext, RunOutcome, failure, shorten
from tickwheel.engine.runners.secrets import ENV_PREFIX

__all__ = ["STDERR_LIMIT", "STDOUT_LIMIT", "CommandRunner", "Tail", "command_env", "run_process"]

logger = logging.getLogger(__name__)

STDOUT_LIMIT: Final = 1024 * 1024
STDERR_LIMIT: Final = 2 * 1024
KILL_GRACE: Final = 5.0  # seconds a killed group gets to close its pipes and be reaped
_CHUNK: Final = 64 * 1024


class Tail:
    """The last ``limit`` bytes of a stream and how many went by: memory stays under 2 * limit,
    however much a program writes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._buffer = bytearray()

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self._buffer += chunk
        if len(self._buffer) > 2 * self.limit:  # trim now and then, not on every chunk
            del self._buffer[: -self.limit]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def data(self) -> bytes:
        return bytes(self._buffer[-self.limit :]) if self.limit else b""

    def text(self) -> str:
        return self.data().decode("utf-8", errors="replace")

    async def read_from(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(_CHUNK):
            self.add(chunk)


def command_env(ctx: JobContext) -> dict[str, str]:
    """The inherited environment, without the worker's secrets, plus the attempt's identity."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)},
        "TICKWHEEL_EXECUTION_ID": str(ctx.execution_id),
        "TICKWHEEL_ATTEMPT": str(ctx.attempt),
        "TICKWHEEL_FENCING_TOKEN": str(ctx.fencing_token),
    }


class CommandRunner:
    """Runs ``command`` executions as child processes of this one."""

    def __init__(
        self,
        *,
        stdout_limit: int = STDOUT_LIMIT,
        stderr_limit: int = STDERR_LIMIT,
        policy: RunPolicy | None = None,
    ):
        self.stdout_limit = stdout_limit
        self.stderr_limit = stderr_limit
        self.policy = policy or RunPolicy()

    async def run(
        self, definition: Definition, inputs: dict[str, Any], ctx: JobContext
    ) -> RunOutcome:
        execution = definition.execution
        if not isinstance(execution, CommandExecution):
            return failure("permanent", f"the command runner cannot run a {execution.type} job")
        if problems := run_problems(execution, self.policy):
            return failure(
                "permanent", f"refused: {'; '.join(problems)}", argv=list(execution.argv)
            )
        return await run_process(
            execution.argv,
            inputs,
            ctx,
            stdout_limit=self.stdout_limit,
            stderr_limit=self.stderr_limit,
        )


async def run_process(
    argv: Sequence[str],
    inputs: dict[str, Any],
    ctx: JobContext,
    *,
    stdout_limit: int = STDOUT_LIMIT,
    stderr_limit: int = STDERR_LIMIT,
) -> RunOutcome:
    """Run ``argv`` with ``inputs`` as JSON on stdin and read its outputs from stdout (see the
    module doc). Cancellation kills the process group, reaps the program and propagates."""
    if not argv:
        return failure("permanent", "the command is empty")
    payload = json.dumps(inputs).encode() + b"\n"
    program = argv[0]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=command_env(ctx),
            start_new_session=True,  # its own process group, which a timeout kills whole
        )
    except (FileNotFoundError, NotADirectoryError):
        return failure("permanent", f"executable not found: {program!r}", argv=list(argv))
    except PermissionError as exc:
        return failure("permanent", f"cannot execute {program!r}: {exc}", argv=list(argv))
    except OSError as exc:  # out of processes or file descriptors: may pass
        return failure("error", f"cannot start {program!r}: {exc}", argv=list(argv))
    stdout, stderr = Tail(stdout_limit), Tail(stderr_limit)
    assert proc.stdin and proc.stdout and proc.stderr  # all three are pipes
    try:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(_feed(proc.stdin, payload))
            tasks.create_task(stdout.read_from(proc.stdout))
            tasks.create_task(stderr.read_from(proc.stderr))
        code = await proc.wait()
    except asyncio.CancelledError:
        # A cancel of the execution asks first (SIGTERM, then the grace); a timeout or a
        # shutdown does not wait.
        await _kill(proc, ctx.state.cancel_grace if ctx.cancelled else 0.0)
        raise
    except Exception as exc:  # our side of the pipes failed: not the job's doing, but the attempt's
        await _kill(proc)
        return failure("error", f"lost the pipes of {program!r}: {exc}", argv=list(argv))
    if code != 0:
        return _exit_failure(program, code, stderr)
    return _parse_stdout(stdout)


async def _feed(stdin: asyncio.StreamWriter, payload: bytes) -> None:
    try:
        stdin.write(payload)
        await stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the program exited or closed its stdin without reading it: its choice
    finally:
        stdin.close()


async def _kill(proc: asyncio.subprocess.Process, grace: float = 0.0) -> None:
    """SIGKILL the program's process group, then reap the program. With a ``grace``, SIGTERM
    first, and SIGKILL only if the program has not exited ``grace`` seconds later.

    Killing the group, not only the pid, takes the children it started. The group id is the
    program's pid, which cannot be reused while any member of the group lives; once the group is
    empty the kill finds nothing (ProcessLookupError), which is fine.
    """
    if grace > 0:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            async with asyncio.timeout(grace):
                await asyncio.gather(_discard(proc.stdout), _discard(proc.stderr))
                await proc.wait()
        except TimeoutError:
            pass
        finally:  # also when the grace itself is cut short (the definition's timeout)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        # Drain the pipes to their end: the transport only reports the exit (and frees the pipes)
        # once they are closed, and a paused reader would never see the end.
        async with asyncio.timeout(KILL_GRACE):
            await asyncio.gather(_discard(proc.stdout), _discard(proc.stderr))
            await proc.wait()
    except TimeoutError:
        # Only a process that left the group (a daemon) can hold the pipes open this long.
        logger.warning("pid %s: killed, but its pipes stayed open for %s s", proc.pid, KILL_GRACE)


async def _discard(stream: asyncio.StreamReader | None) -> None:
    while stream is not None and await stream.read(_CHUNK):
        pass


def _exit_failure(program: str, code: int, stderr: Tail) -> RunOutcome:
    if code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"exited with code {code}"
    text = stderr.text()
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    message = f"{program} {how}" + (f": {shorten(last, 200)}" if last else "")
    return failure("error", message, exit_code=code, stderr_tail=text)


def _parse_stdout(stdout: Tail) -> RunOutcome:
    lines = stdout.data().splitlines()
    if stdout.truncated:
        lines = lines[1:]  # the first line of a cut tail is (almost always) a partial one
    for raw in reversed(lines):
        line = raw.strip()
        if not line.startswith(b"{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:  # also UnicodeDecodeError
            continue
        if isinstance(value, dict):
            return RunOutcome(ok=True, output=value)
    if stdout.truncated:
        return failure(
            "invalid_output",
            f"stdout was {stdout.total} bytes and its last {stdout.limit} bytes hold no JSON"
            " object line",
            stdout_bytes=stdout.total,
        )
    return RunOutcome(ok=True, output={})
