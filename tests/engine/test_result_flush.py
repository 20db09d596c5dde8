"""A flush waits for the batch already on its way, not only for the buffer to empty: a drain
(tests, a workflow rig) or a shutdown that returned before that batch committed left its
executions RUNNING for whoever read them next."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import cast

from tests.engine.recording import RecordingStore
from tests.factories import T0, definition, new_execution, stored
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.states import ExecutionStatus
from tickwheel.engine.worker import Worker
from tickwheel.services.settings import WorkerSettings
from tickwheel.store.protocol import AttemptResult, Store


class GatedStore(RecordingStore):
    """The store, whose reports of finished attempts wait for the test to open a gate."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.reporting = asyncio.Event()
        self.gate = asyncio.Event()

    async def attempt_finish_many(
        self, results: Sequence[AttemptResult], now: datetime | None = None
    ) -> list[bool]:
        self.reporting.set()
        await self.gate.wait()
        return await self.store.attempt_finish_many(results, now)


async def test_a_drain_returns_only_once_the_batch_on_its_way_has_committed(store: Store) -> None:
    assert await store.definition_insert(stored(definition()))
    gated = GatedStore(store)
    worker = Worker(
        cast(Store, gated),
        FakeClock(T0),
        worker_id="w1",
        # One result makes a batch: the flusher takes it off the buffer at once.
        settings=WorkerSettings(concurrency=2, finish_batch=1, finish_interval=0),
    )
    [outcome] = await store.execution_insert_many([new_execution()])
    execution_id = outcome.execution.execution_id
    assert await worker.run_once() == 1
    await asyncio.wait_for(gated.reporting.wait(), 20)
    assert len(worker.results) == 0  # taken by the flusher, not committed yet

    draining = asyncio.create_task(worker.drain())
    for _ in range(50):  # every step the drain could take without the store
        await asyncio.sleep(0)
    assert not draining.done(), "the drain returned before its last batch committed"

    gated.gate.set()
    await asyncio.wait_for(draining, 20)
    found = await store.execution_get("acme", execution_id)
    assert found is not None and found.status is ExecutionStatus.SUCCEEDED
    assert worker.finished == 1
