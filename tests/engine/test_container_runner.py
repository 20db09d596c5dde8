"""The container runner, with a fake runtime: this machine has a docker CLI but no engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.engine.helpers import (
    EXECUTION_ID,
    TEST_POLICY,
    context,
    definition,
    fake_runtime,
    runtime_calls,
)
from tickwheel.domain.definitions import ContainerExecution
from tickwheel.engine.runners import ContainerRunner, run_attempt


def container(image: str = "alpine:3", timeout: float = 5.0) -> Any:
    execution = ContainerExecution(image, ("python3", "-c", "print(1)"))
    return definition(execution, timeout, argv="array", stdin="object", env="object")


@pytest.mark.parametrize("found", ["docker", "podman"])
async def test_container_runs_the_runtime_like_a_command(tmp_path: Path, found: str) -> None:
    runtime = fake_runtime(tmp_path, found)
    looked: list[str] = []

    def which(name: str) -> str | None:
        looked.append(name)
        return str(runtime) if name == found else None

    runners = {"container": ContainerRunner(which=which, policy=TEST_POLICY)}
    outcome = await run_attempt(container(), {"day": 1}, context(), runners=runners)
    assert outcome.ok, outcome
    assert looked == ["docker", "podman"][: 1 + (found == "podman")]
    assert outcome.output is not None
    assert outcome.output["argv"] == [
        "run", "--rm", "-i", "--name", f"tw-{EXECUTION_ID}-2",
        "-e", "TICKWHEEL_EXECUTION_ID", "-e", "TICKWHEEL_ATTEMPT", "-e", "TICKWHEEL_FENCING_TOKEN",
        "--", "alpine:3", "python3", "-c", "print(1)",
    ]  # fmt: skip
    assert outcome.output["stdin"] == {"day": 1}
    assert outcome.output["env"]["TICKWHEEL_FENCING_TOKEN"] == "41"


async def test_container_without_runtime_is_missing_runtime() -> None:
    runners = {"container": ContainerRunner(which=lambda name: None, policy=TEST_POLICY)}
    outcome = await run_attempt(container(), {}, context(), runners=runners)
    assert outcome.kind == "missing_runtime"
    assert "docker" in outcome.message and "podman" in outcome.message


async def test_container_timeout_kills_the_client_and_the_container(tmp_path: Path) -> None:
    runtime = fake_runtime(tmp_path)
    runners = {"container": ContainerRunner(which=lambda name: str(runtime), policy=TEST_POLICY)}
    outcome = await run_attempt(container("sleepy", 0.5), {}, context(), runners=runners)
    assert outcome.kind == "timeout"
    run, kill = runtime_calls(tmp_path)
    assert kill["argv"] == ["kill", f"tw-{EXECUTION_ID}-2"]
    assert not Path(f"/proc/{run['pid']}").exists()
