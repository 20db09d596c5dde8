"""``container`` executions: ``<runtime> run --rm -i --name tw-<execution_id>-<attempt> ... --
<image> <command...>`` with docker, else podman, run exactly like a ``command`` execution (the
inputs as JSON on stdin, the outputs as a JSON object on stdout; see ``command``).

A worker runs containers only when its operator enabled them, and only images matching its
patterns (``RunPolicy.container_images``, ``TICKWHEEL_CONTAINER_IMAGES``). The image must be an
image reference by the docker grammar (so it starts with a letter or digit) and comes after
``--``: nothing from a definition is ever read as a runtime option.

The attempt's identity reaches the container as the environment variables
``TICKWHEEL_EXECUTION_ID``, ``TICKWHEEL_ATTEMPT`` and ``TICKWHEEL_FENCING_TOKEN`` (``-e NAME``
passes each on from the runtime's own environment). Killing the runtime's client process does
not stop a container, so a cancelled attempt (its timeout included) also runs
``<runtime> kill tw-...``, best effort. No runtime on PATH, or one that cannot reach its engine
(a docker CLI without a daemon), is a permanent "missing_runtime".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Callable
from typing import Any, Final

from tickwheel.domain.definitions import ContainerExecution, Definition
from tickwheel.domain.run_policy import RunPolicy, run_problems
from tickwheel.engine.runners.base import JobContext, RunOutcome, failure
from tickwheel.engine.runners.command import STDERR_LIMIT, STDOUT_LIMIT, run_process

__all__ = ["RUNTIMES", "ContainerRunner", "container_name"]

logger = logging.getLogger(__name__)

RUNTIMES: Final = ("docker", "podman")
KILL_TIMEOUT: Final = 5.0
_PASSED_ENV: Final = ("TICKWHEEL_EXECUTION_ID", "TICKWHEEL_ATTEMPT", "TICKWHEEL_FENCING_TOKEN")
# What docker and podman print when their engine is not there (exit code 125).
_NO_ENGINE: Final = (
    "cannot connect to the docker daemon",
    "is the docker daemon running",
    "cannot connect to podman",
    "unable to connect to podman",
)


def container_name(ctx: JobContext) -> str:
    """The container's name: one per attempt, so that a timeout can kill it by name."""
    return f"tw-{ctx.execution_id}-{ctx.attempt}"


class ContainerRunner:
    """Runs ``container`` executions through a container runtime's CLI. ``which`` finds a
    runtime's executable by name (``shutil.which``; tests inject their own)."""

    def __init__(
        self,
        *,
        which: Callable[[str], str | None] = shutil.which,
        stdout_limit: int = STDOUT_LIMIT,
        stderr_limit: int = STDERR_LIMIT,
        kill_timeout: float = KILL_TIMEOUT,
        policy: RunPolicy | None = None,
    ) -> None:
        self.policy = policy or RunPolicy()
        self._which = which
        self.stdout_limit = stdout_limit
        self.stderr_limit = stderr_limit
        self.kill_timeout = kill_timeout

    def runtime(self) -> str | None:
        """The path of the first runtime on PATH (docker, then podman), or None."""
        for name in RUNTIMES:
            path = self._which(name)
            if path:
                return path
        return None

    async def run(
        self, definition: Definition, inputs: dict[str, Any], ctx: JobContext
    ) -> RunOutcome:
        execution = definition.execution
        if not isinstance(execution, ContainerExecution):
            return failure("permanent", f"the container runner cannot run a {execution.type} job")
        if problems := run_problems(execution, self.policy):
            return failure("permanent", f"refused: {'; '.join(problems)}", image=execution.image)
        runtime = self.runtime()
        if runtime is None:
            return failure(
                "missing_runtime",
                "no container runtime: neither docker nor podman is on PATH",
                image=execution.image,
            )
        name = container_name(ctx)
        env = [arg for var in _PASSED_ENV for arg in ("-e", var)]
        # "--": whatever follows is the image and its command, never an option of the runtime.
        argv = [runtime, "run", "--rm", "-i", "--name", name, *env, "--", execution.image]
        argv.extend(execution.command)
        try:
            outcome = await run_process(
                argv,
                inputs,
                ctx,
                stdout_limit=self.stdout_limit,
                stderr_limit=self.stderr_limit,
            )
        except asyncio.CancelledError:
            # run_process killed the runtime's client; the container itself lives on until told.
            await self._kill(runtime, name)
            raise
        return _engine_missing(outcome, runtime, execution.image) or outcome

    async def _kill(self, runtime: str, name: str) -> None:
        """``<runtime> kill <name>``, best effort: a failure is logged, never raised."""
        try:
            proc = await asyncio.create_subprocess_exec(
                runtime,
                "kill",
                name,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
        except OSError as exc:
            logger.warning("cannot run %s kill %s: %s", runtime, name, exc)
            return
        try:
            async with asyncio.timeout(self.kill_timeout):
                code = await proc.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            logger.warning("%s kill %s took over %s s; gave up", runtime, name, self.kill_timeout)
            return
        if code != 0:  # often: the container was already gone
            logger.info("%s kill %s exited with code %s", runtime, name, code)


def _engine_missing(outcome: RunOutcome, runtime: str, image: str) -> RunOutcome | None:
    """A "missing_runtime" outcome when the runtime's CLI ran but found no engine to talk to:
    no retry of this attempt on this worker will find one."""
    detail = outcome.detail or {}
    if outcome.ok or detail.get("exit_code") != 125:
        return None
    stderr = str(detail.get("stderr_tail", ""))
    if not any(sign in stderr.lower() for sign in _NO_ENGINE):
        return None
    return failure(
        "missing_runtime",
        f"no container runtime: {runtime} is installed but cannot reach its engine"
        f" ({outcome.message})",
        image=image,
    )
