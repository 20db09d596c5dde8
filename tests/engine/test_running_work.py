"""Running work through a real worker (in this process, on both backends): a cancel reaches a
running async handler, a sync handler and a command (SIGTERM, then SIGKILL after the grace);
progress and checkpoint ride on the heartbeat; a checkpoint reaches the next attempt; a snooze
does not burn the retry budget."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.engine import running_jobs
from tests.engine.helpers import TEST_POLICY, is_running, python_argv
from tests.factories import T0, stored
from tickwheel.app.executions import ExecutionService
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.definitions import definition_from_document
from tickwheel.domain.models import Execution, ExecutionEventKind
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.domain.submission import SubmitRequest
from tickwheel.engine.runners import default_runners
from tickwheel.engine.worker import Worker
from tickwheel.services.settings import WorkerSettings
from tickwheel.store.protocol import Store

LEASE = timedelta(seconds=0.3)  # a heartbeat every 0.1 s of real time
ALL_SHARDS = range(1024)


def job(name: str, execution: dict[str, Any], **doc: Any) -> dict[str, Any]:
    return {
        "name": name,
        "version": 1,
        "inputs": doc.pop("inputs", {}),
        "execution": execution,
        "timeout": 60,
        "retry": doc.pop("retry", {"maxAttempts": 3, "baseDelay": 1, "maxDelay": 1}),
        **doc,
    }


def python_job(name: str, function: str, **doc: Any) -> dict[str, Any]:
    entrypoint = f"tests.engine.running_jobs:{function}"
    return job(name, {"type": "python", "entrypoint": entrypoint}, **doc)


async def setup(
    store: Store, doc: dict[str, Any], inputs: dict[str, Any] | None = None, grace: float = 5.0
) -> tuple[Worker, ExecutionService, Execution]:
    assert await store.definition_insert(stored(definition_from_document(doc)))
    clock = FakeClock(T0)
    service = ExecutionService(store, "acme", clock)
    written = await service.submit(SubmitRequest(f"registry://jobs/{doc['name']}", inputs or {}))
    runners = default_runners(policy=TEST_POLICY)
    worker = Worker(
        store,
        clock,
        worker_id="w1",
        runners=runners,
        settings=WorkerSettings(lease=LEASE, cancel_grace=grace),
    )
    running_jobs.SEEN.clear()
    running_jobs.STARTED.clear()
    return worker, service, written.value


async def until(condition: Callable[[], Awaitable[bool]], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def cancelled_ok(store: Store, service: ExecutionService, ex: Execution) -> Execution:
    got = await service.get(ex.execution_id)
    assert got.status is ExecutionStatus.CANCELLED and got.finished_at is not None
    assert got.error is not None and got.error["kind"] == "cancelled"
    [attempt] = await store.attempt_list("acme", ex.execution_id)
    assert attempt.status is AttemptStatus.CANCELLED
    history = await service.history(ex.execution_id)
    assert [e.kind for e in history] == [ExecutionEventKind.CANCEL_REQUESTED]
    return got


async def test_a_cancel_stops_an_async_handler_at_its_next_await(store: Store) -> None:
    doc = python_job("copy", "copy_rows", inputs={"rows": "integer"}, outputs={"from": "integer"})
    worker, service, ex = await setup(store, doc, {"rows": 100_000})
    assert await worker.run_once() == 1

    async def progressed() -> bool:
        got = await service.get(ex.execution_id)
        return got.progress is not None and got.checkpoint is not None

    await until(progressed)  # progress and checkpoint came with a heartbeat
    asked = await service.cancel(ex.execution_id)
    assert asked.status is ExecutionStatus.RUNNING and asked.cancel_requested_at == T0
    await worker.drain()
    got = await cancelled_ok(store, service, ex)
    assert running_jobs.SEEN == ["cancelled at await, context.cancelled=True"]
    assert got.progress is not None and got.progress["message"].startswith("copied ")
    assert 0 <= got.progress["fraction"] < 1


async def test_a_cancel_reaches_a_sync_handler_through_progress(store: Store) -> None:
    worker, service, ex = await setup(store, python_job("loop", "sync_loop"))
    assert await worker.run_once() == 1
    await until(lambda: asyncio.to_thread(running_jobs.STARTED.is_set))
    await service.cancel(ex.execution_id)
    await worker.drain()
    await cancelled_ok(store, service, ex)
    # The thread heard it too, and ended (it holds no slot).
    await until(lambda: asyncio.sleep(0, bool(running_jobs.SEEN)))
    assert running_jobs.SEEN == ["Cancelled from progress, context.cancelled=True"]
    await until(lambda: asyncio.sleep(0, worker.stuck_threads == 0))


TRAPS_TERM = """
import pathlib, signal, sys, time
marker = pathlib.Path(sys.argv[1])
def term(*_):
    marker.write_text("TERM")
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
marker.write_text("started")
time.sleep(60)
"""

IGNORES_TERM = """
import os, pathlib, signal, sys, time
marker = pathlib.Path(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *_: marker.write_text("TERM ignored"))
marker.write_text(f"started {os.getpid()}")
while True:
    time.sleep(0.01)
"""


@pytest.mark.parametrize(("code", "seen"), [(TRAPS_TERM, "TERM"), (IGNORES_TERM, "TERM ignored")])
async def test_a_cancelled_command_gets_sigterm_then_sigkill_after_the_grace(
    store: Store, tmp_path: Path, code: str, seen: str
) -> None:
    marker = tmp_path / "marker"
    doc = job("cmd", {"type": "command", "argv": list(python_argv(code, str(marker)))})
    grace = 0.5
    worker, service, ex = await setup(store, doc, grace=grace)
    assert await worker.run_once() == 1
    await until(lambda: asyncio.sleep(0, marker.exists() and "started" in marker.read_text()))
    pid = int(marker.read_text().split()[1]) if code is IGNORES_TERM else None
    await service.cancel(ex.execution_id)
    asked = time.monotonic()
    await worker.drain()
    waited = time.monotonic() - asked
    await cancelled_ok(store, service, ex)
    assert marker.read_text() == seen
    if pid is not None:  # it ignored SIGTERM: SIGKILL came after the grace
        assert waited >= grace and not is_running(pid)


async def test_a_checkpoint_is_handed_to_the_next_attempt(store: Store) -> None:
    worker, service, ex = await setup(
        store, python_job("resume", "fail_once_with_checkpoint", outputs={"resumed": "array"})
    )
    assert await worker.run_once() == 1
    await worker.drain()
    got = await service.get(ex.execution_id)
    assert got.status is ExecutionStatus.RETRY_WAIT and got.checkpoint == {"done": ["a", "b"]}
    await store.execution_promote_due(ALL_SHARDS, 10, T0 + timedelta(minutes=5))
    assert await worker.run_once() == 1
    await worker.drain()
    got = await service.get(ex.execution_id)
    assert got.status is ExecutionStatus.SUCCEEDED and got.output == {"resumed": ["a", "b"]}


async def test_a_snooze_runs_again_later_without_burning_the_budget(store: Store) -> None:
    doc = python_job(
        "nap", "snooze_first", retry={"maxAttempts": 1}, outputs={"attempt": "integer"}
    )
    worker, service, ex = await setup(store, doc)
    waits = []
    for _ in range(2):
        assert await worker.run_once() == 1
        await worker.drain()
        got = await service.get(ex.execution_id)
        assert got.status is ExecutionStatus.RETRY_WAIT and got.next_attempt_at is not None
        waits.append((got.next_attempt_at - T0).total_seconds())
        await store.execution_promote_due(ALL_SHARDS, 10, got.next_attempt_at)
    assert await worker.run_once() == 1
    await worker.drain()
    got = await service.get(ex.execution_id)
    assert waits == [60.0, 30.0]
    assert (got.status, got.output) == (ExecutionStatus.SUCCEEDED, {"attempt": 3})
    assert (got.attempt_count, got.max_attempts) == (3, 3)  # each snooze gave its attempt back
    attempts = await store.attempt_list("acme", ex.execution_id)
    assert [a.status for a in attempts] == [
        AttemptStatus.ABANDONED,
        AttemptStatus.ABANDONED,
        AttemptStatus.SUCCEEDED,
    ]
    assert [a.error["kind"] for a in attempts[:2] if a.error] == ["snoozed", "snoozed"]
    assert attempts[0].error is not None and attempts[0].error["message"] == "the upstream is busy"
