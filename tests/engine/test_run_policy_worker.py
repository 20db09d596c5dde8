"""A worker refuses what its run policy forbids as a permanent failure, even for a definition
stored by other means than registration (straight into the store): one attempt, no retries,
dead-lettered with an error that says why. Both backends."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tests.factories import T0, stored
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.definitions import definition_from_document
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.domain.submission import SubmitRequest
from tickwheel.engine.runners import ContainerRunner, default_runners
from tickwheel.engine.worker import Worker
from tickwheel.store.protocol import Store

NO_DAEMON = """#!/bin/sh
echo "docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. \
Is the docker daemon running?" >&2
exit 125
"""


async def run_once(store: Store, execution: dict[str, Any], worker: Worker, **inputs: Any) -> Any:
    """Store a definition directly (no registration checks), submit it, work it; the result."""
    doc = {"name": "sneaky", "version": 1, "execution": execution, "outputs": {}, "timeout": 5}
    doc["inputs"] = {name: "string" for name in inputs}
    doc["retry"] = {"maxAttempts": 5, "baseDelay": 1, "maxDelay": 1}
    assert await store.definition_insert(stored(definition_from_document(doc)))
    client = InProcessTransport(store, "acme", worker.clock)  # type: ignore[arg-type]
    wire, _ = await client.submit(SubmitRequest("registry://jobs/sneaky", inputs=inputs))
    eid = uuid.UUID(str(wire["executionId"]))
    assert await worker.run_once() == 1
    await worker.drain()
    return await client.get(eid), await client.attempts(eid)


async def test_os_system_stored_by_other_means_is_dead_lettered_unrun(
    store: Store, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    worker = Worker(store, FakeClock(T0), worker_id="w1")  # the default policy
    execution = {"type": "python", "entrypoint": "os:system"}
    got, attempts = await run_once(store, execution, worker, command=f"touch {marker}")
    assert got["status"] == "FAILED", got
    assert got["error"]["kind"] == "permanent"
    assert "standard library" in got["error"]["message"]
    assert len(attempts) == 1
    assert not marker.exists()


async def test_a_container_runtime_without_its_engine_is_dead_lettered_at_once(
    store: Store, tmp_path: Path
) -> None:
    runtime = tmp_path / "docker"
    runtime.write_text(NO_DAEMON)
    runtime.chmod(0o755)
    policy = RunPolicy(container_images=("*",))
    runners = dict(default_runners(policy=policy))
    runners["container"] = ContainerRunner(which=lambda name: str(runtime), policy=policy)
    worker = Worker(store, FakeClock(T0), worker_id="w1", runners=runners)
    got, attempts = await run_once(store, {"type": "container", "image": "alpine:3"}, worker)
    assert got["status"] == "FAILED", got
    assert got["error"]["kind"] == "missing_runtime"
    assert "cannot reach its engine" in got["error"]["message"]
    assert len(attempts) == 1


async def test_an_option_as_image_is_dead_lettered_without_calling_the_runtime(
    store: Store, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    runtime = tmp_path / "docker"
    runtime.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    runtime.chmod(0o755)
    policy = RunPolicy(container_images=("*",))
    runners = {"container": ContainerRunner(which=lambda name: str(runtime), policy=policy)}
    worker = Worker(store, FakeClock(T0), worker_id="w1", runners=runners)
    got, attempts = await run_once(store, {"type": "container", "image": "--privileged"}, worker)
    assert got["status"] == "FAILED" and got["error"]["kind"] == "permanent"
    assert "not an image reference" in got["error"]["message"]
    assert len(attempts) == 1 and not calls.exists()


async def test_http_to_the_metadata_service_is_dead_lettered(store: Store) -> None:
    worker = Worker(store, FakeClock(T0), worker_id="w1")
    execution = {"type": "http", "url": "http://169.254.169.254/latest/meta-data/"}
    got, attempts = await run_once(store, execution, worker)
    assert got["status"] == "FAILED" and got["error"]["kind"] == "permanent"
    assert "link-local" in got["error"]["message"] and len(attempts) == 1
