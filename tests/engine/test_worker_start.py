"""A worker's first round: its registry report goes out beside its first claim, not before it,
and the round still ends with the worker registered."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from tests.engine.recording import RecordingStore
from tests.factories import T0
from tickwheel.domain.clock import FakeClock
from tickwheel.engine.worker import Worker
from tickwheel.store.protocol import Store


class ReportAfterClaim(RecordingStore):
    """A store whose registry write completes only once a claim was sent: a worker that waited
    for its report before claiming would wait for ever."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.claim_sent = asyncio.Event()

    async def execution_claim_ready(self, *args: Any, **kwargs: Any) -> Any:
        self.claim_sent.set()
        return await super().execution_claim_ready(*args, **kwargs)

    async def worker_heartbeat(self, *args: Any, **kwargs: Any) -> None:
        await self.claim_sent.wait()
        await self.store.worker_heartbeat(*args, **kwargs)


async def test_the_first_claim_does_not_wait_for_the_registry(store: Store) -> None:
    clock = FakeClock(T0)
    recording = ReportAfterClaim(store)
    worker = Worker(recording, clock, worker_id="w-start")
    assert await asyncio.wait_for(worker.run_once(), 10) == 0
    assert recording.claims == [(worker.concurrency, 0)]
    registered = await store.worker_list(alive_since=_ago(clock.now()))
    assert [w.worker_id for w in registered] == ["w-start"]


def _ago(now: datetime) -> datetime:
    return now - timedelta(minutes=1)
