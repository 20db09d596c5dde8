"""A herd's first claim alone on the cores: a scheduler with a worker in its process sends an
instant's next batches once that worker's claim is back (the scheduler's side is in
test_wheel_scheduler.py). Here the worker's side, on both backends and the fake clock: what
``claim_back`` waits for, and that the engine wires it only with a worker beside the scheduler."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from tests.engine.recording import RecordingStore
from tests.factories import T0, new_execution
from tickwheel.config import Settings
from tickwheel.domain.clock import FakeClock
from tickwheel.engine.scheduler import Scheduler
from tickwheel.engine.worker import Worker
from tickwheel.observability.metrics import Metrics
from tickwheel.server import Engine
from tickwheel.store.protocol import Store


class HeldClaims(RecordingStore):
    """Each claim waits for ``go`` before it reaches the store."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.go = asyncio.Event()

    async def execution_claim_ready(
        self,
        worker_id: str,
        limit: int,
        lease: timedelta,
        now: datetime | None = None,
        definition_uris: Sequence[str] | None = None,
    ) -> Any:
        await self.go.wait()
        return await super().execution_claim_ready(worker_id, limit, lease, now, definition_uris)


async def test_claim_back_waits_for_the_claim_in_flight_and_its_starts(store: Store) -> None:
    await store.execution_insert_many([new_execution() for _ in range(3)])
    held = HeldClaims(store)
    worker = Worker(cast(Store, held), FakeClock(T0), worker_id="w1")
    worker.metrics = Metrics()
    await asyncio.wait_for(worker.claim_back(5), 1)  # no claim in flight: back at once
    claiming = asyncio.create_task(worker.run_once())
    await asyncio.sleep(0)
    waiting = asyncio.create_task(worker.claim_back(5))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiting.done()  # the claim has not come back
    held.go.set()
    await asyncio.wait_for(waiting, 5)
    assert len(worker.running) == 3  # its executions started before the wait ended
    assert await claiming == 3
    await worker.drain()


async def test_claim_back_waits_no_longer_than_its_limit(store: Store) -> None:
    held = HeldClaims(store)
    worker = Worker(cast(Store, held), FakeClock(T0), worker_id="w1")
    worker.metrics = Metrics()
    claiming = asyncio.create_task(worker.run_once())
    await asyncio.sleep(0)
    await asyncio.wait_for(worker.claim_back(0), 1)  # a limit of 0: back at once
    assert not claiming.done()  # never cancelled by the wait
    held.go.set()
    assert await claiming == 0


async def test_the_engine_wires_the_hold_only_with_a_worker(store: Store) -> None:
    both = Engine(store, Settings(_env_file=None), scheduler=True, worker=True, leased=True)
    alone = Engine(store, Settings(_env_file=None), scheduler=True, worker=False, leased=True)
    [s] = [s for s in both.services if isinstance(s, Scheduler)]
    assert both.worker is not None
    assert s.claim_back == both.worker.claim_back
    [s] = [s for s in alone.services if isinstance(s, Scheduler)]
    assert s.claim_back is None
