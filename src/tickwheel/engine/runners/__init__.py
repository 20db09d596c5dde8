"""How one attempt of an Execution actually runs, one runner per execution type.

``run_attempt(definition, inputs, ctx)`` is the entry point a worker calls: it picks the runner,
enforces the definition's timeout and checks the outputs; every failure of the job comes back as
a ``RunOutcome`` (only cancellation propagates).
"""

from __future__ import annotations

from collections.abc import Mapping

from tickwheel.domain.run_policy import RunPolicy
from tickwheel.engine.runners.base import JobContext, Runner, RunOutcome, run_attempt
from tickwheel.engine.runners.command import CommandRunner
from tickwheel.engine.runners.container import ContainerRunner
from tickwheel.engine.runners.http import HttpRunner
from tickwheel.engine.runners.python import PythonRunner
from tickwheel.engine.runners.secrets import Secrets

__all__ = [
    "CommandRunner",
    "ContainerRunner",
    "HttpRunner",
    "JobContext",
    "PythonRunner",
    "RunOutcome",
    "Runner",
    "Secrets",
    "default_runners",
    "run_attempt",
]


def default_runners(
    *, max_threads: int = 32, policy: RunPolicy | None = None, secrets: Secrets | None = None
) -> Mapping[str, Runner]:
    """A runner for each execution type, each applying ``policy`` (by default the default one:
    see docs/worker_policy.md); ``max_threads`` bounds the python runner's pool, ``secrets``
    fills in the http runner's secret references (by default from the environment)."""
    policy = policy or RunPolicy()
    return {
        "python": PythonRunner(max_threads=max_threads, policy=policy),
        "command": CommandRunner(policy=policy),
        "http": HttpRunner(policy=policy, secrets=secrets),
        "container": ContainerRunner(policy=policy),
    }
