"""A worker's first round: its first claim goes out beside its registry report, not after it;
the report is still sent first, and the round ends with the worker registered."""

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
        self.calls: list[str] = []

    async def execution_claim_ready(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("claim")
        self.claim_sent.set()
        return await super().execution_claim_ready(*args, **kwargs)

    async def worker_heartbeat(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append("report")
        await self.claim_sent.wait()
        await self.store.worker_heartbeat(*args, **kwargs)


async def test_the_first_claim_does_not_wait_for_the_registry(store: Store) -> None:
    clock = FakeClock(T0)
    recording = ReportAfterClaim(store)
    worker = Worker(recording, clock, worker_id="w-start")
    assert await asyncio.wait_for(worker.run_once(), 10) == 0
    # The report first, in the round's own step: the registry's row is written before the
    # queries of services started beside the worker (the gauge of live workers counts it).
    assert recording.calls == ["report", "claim"]
    assert recording.claims == [(worker.concurrency, 0)]
    registered = await store.worker_list(alive_since=_ago(clock.now()))
    assert [w.worker_id for w in registered] == ["w-start"]


def _ago(now: datetime) -> datetime:
    return now - timedelta(minutes=1)
