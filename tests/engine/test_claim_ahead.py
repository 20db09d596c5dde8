"""Claiming ahead (engine/worker.py, ``WorkerSettings.claim_ahead``): while attempts are short a
worker claims the next batch while this one runs, never runs more than its concurrency at once,
runs each execution once; while they are long it claims only free slots; and what it claimed
ahead and could not start within a third of a lease goes back to READY without an attempt
burnt."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import cast

import pytest

from tests.engine.recording import RecordingStore
from tests.factories import T0, definition, new_execution, stored
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.definitions import Definition
from tickwheel.domain.models import Execution
from tickwheel.domain.states import AttemptStatus
from tickwheel.engine import worker as worker_module
from tickwheel.engine.worker import Worker
from tickwheel.services.settings import WorkerSettings
from tickwheel.store.engine_protocol import RELEASED_UNSTARTED
from tickwheel.store.protocol import Store


class Recording(RecordingStore):
    """The store's record, and the most attempts the worker ever had running at once."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.most_running = 0


def napping() -> Definition:
    return definition(
        inputs={"seconds": "number"},
        outputs={"slept": "number"},
        execution={"type": "python", "entrypoint": "tests.engine.jobs_for_tests:naps"},
    )


async def _set_up(store: Store, settings: WorkerSettings) -> tuple[Definition, Recording, Worker]:
    """The napping definition stored, and a worker over a recording of the store."""
    d = napping()
    assert await store.definition_insert(stored(d))
    recording = Recording(store)
    worker = Worker(cast(Store, recording), FakeClock(T0), worker_id="w1", settings=settings)
    return d, recording, worker


async def _run(worker: Worker, recording: Recording, done: int, timeout: float = 30.0) -> None:
    running = asyncio.create_task(worker.run())
    deadline = time.monotonic() + timeout
    try:
        while worker.finished < done:
            recording.most_running = max(recording.most_running, len(worker.running))
            assert time.monotonic() < deadline, (worker.finished, recording.claims)
            await asyncio.sleep(0.001)
    finally:
        await worker.shutdown(grace=5)
        await running


async def _attempts(store: Store, executions: list[Execution]) -> list[list[AttemptStatus]]:
    return [
        [a.status for a in await store.attempt_list("acme", e.execution_id)] for e in executions
    ]


async def test_short_attempts_are_claimed_ahead_each_run_once_never_past_concurrency(
    store: Store,
) -> None:
    d, recording, worker = await _set_up(
        store, WorkerSettings(concurrency=4, poll=0.05, ahead_batches=3)
    )
    outcomes = await store.execution_insert_many(
        [new_execution(d=d, inputs={"seconds": 0}) for _ in range(120)]
    )
    executions = [o.execution for o in outcomes]
    await _run(worker, recording, len(executions))
    assert await _attempts(store, executions) == [[AttemptStatus.SUCCEEDED]] * 120
    assert worker.stale_writes == 0
    # Ahead: claims asked for more than the slots and a batch (at most three batches more),
    # and never more than the concurrency ran at once.
    assert max(asked for asked, _ in recording.claims) > 8, recording.claims
    assert max(asked for asked, _ in recording.claims) <= 4 + 3 * 4, recording.claims
    assert recording.most_running <= 4
    assert recording.released == []


async def test_long_attempts_are_never_claimed_ahead(store: Store) -> None:
    d, recording, worker = await _set_up(store, WorkerSettings(concurrency=2, poll=0.05))
    outcomes = await store.execution_insert_many(
        [new_execution(d=d, inputs={"seconds": 0.08}) for _ in range(8)]
    )
    await _run(worker, recording, len(outcomes))
    assert all(asked <= 2 for asked, _ in recording.claims), recording.claims


async def test_what_waited_a_third_of_a_lease_goes_back_to_ready_with_no_attempt_burnt(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four quick attempts make the worker claim ahead; every one after them is long (2 s), so
    what it claims ahead of the first two long ones can only wait, and goes back after a third
    of the lease (0.5 s); it runs later. Every attempt counts as short here (up to 10 s, not
    0.05), so the worker keeps claiming ahead whatever the machine's load: with a fixed 0.6 s a
    loaded machine once finished the quick ones too late to count, and nothing was claimed
    ahead at all."""
    monkeypatch.setattr(worker_module, "AHEAD_SHORT", 10.0)
    d, recording, worker = await _set_up(
        store, WorkerSettings(concurrency=2, poll=0.05, lease=timedelta(seconds=1.5))
    )
    # The quick ones first by priority: every item is READY since the same instant (T0), and
    # the claim's order among equal (priority, ready_at) is the index's, not the list's. Once
    # both slow ones came first, the quick ones then ran between them and nothing waited.
    quick = [new_execution(d=d, inputs={"seconds": 0}, priority=1) for _ in range(4)]
    slow = [new_execution(d=d, inputs={"seconds": 2.0}) for _ in range(4)]
    outcomes = await store.execution_insert_many([*quick, *slow])
    executions = [o.execution for o in outcomes]
    await _run(worker, recording, len(executions))
    # (Read after each release; the worker may have claimed it again by then.)
    assert recording.released, recording.claims
    for e in executions:
        attempts = await store.attempt_list("acme", e.execution_id)
        assert attempts[-1].status is AttemptStatus.SUCCEEDED
        given_back = attempts[:-1]
        assert all(a.status is AttemptStatus.ABANDONED for a in given_back)
        assert all(a.error and a.error["message"] == RELEASED_UNSTARTED for a in given_back)
        # Given back unstarted: the budget grew by one each time (no attempt spent).
        final = await store.execution_get("acme", e.execution_id)
        assert final is not None
        assert final.max_attempts == d.retry.max_attempts + len(given_back)
    assert worker.stale_writes == 0


def test_ahead_batches_are_at_least_one() -> None:
    with pytest.raises(ValueError, match="ahead_batches"):
        Worker(cast(Store, None), FakeClock(T0), settings=WorkerSettings(ahead_batches=0))
