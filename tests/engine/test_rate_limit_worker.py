"""Rate limits seen from workers, on both backends: several workers draining one rate-limited
definition never start more than its budget (token-bucket bound checked on the attempts' start
instants), and a worker whose only READY work waits for a token sleeps until that token comes
(about one claim per token), not in a polling loop."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any, cast

from tests.engine.recording import RecordingStore
from tests.factories import T0, definition, new_execution, stored
from tickwheel.domain.clock import FakeClock, SystemClock
from tickwheel.domain.rate_limits import RateLimitSpec
from tickwheel.domain.states import ExecutionStatus
from tickwheel.engine.worker import Worker
from tickwheel.services.settings import WorkerSettings
from tickwheel.store.protocol import Store

GREET = "registry://jobs/greet"


class CountingStore(RecordingStore):
    """The store, counting claim calls."""

    @property
    def claim_count(self) -> int:
        return len(self.claims)


async def _until(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_a_worker_waiting_for_a_token_sleeps_until_it_comes(store: Store) -> None:
    assert await store.definition_insert(stored(definition()))
    await store.rate_limit_set("acme", GREET, RateLimitSpec(1, 0.25), 1, T0)
    await store.execution_insert_many([new_execution() for _ in range(10)])
    clock = FakeClock(T0)  # frozen: no token comes back until the test moves it
    counting = CountingStore(store)
    worker = Worker(
        cast(Store, counting),
        clock,
        worker_id="w1",
        # A long poll: only the claim's own answer (the next token in 0.25 s) wakes the worker.
        settings=WorkerSettings(concurrency=4, poll=30.0),
    )
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.sleep(1.0)
        # One start (the full bucket), then about one claim per 0.25 s while the fake clock
        # stands still: a polling loop would make hundreds.
        assert counting.started == 1
        waiting = "the only work waiting for a token (4 a second)"
        print(f"\nclaims in 1 s, {waiting}: {counting.claim_count}")
        assert 2 <= counting.claim_count <= 10, counting.claim_count
        claims = counting.claim_count
        clock.advance(0.25)  # a token is due: the next wake-up takes it

        async def two() -> bool:
            return counting.started == 2

        await _until(two, timeout=2.0)
        assert counting.claim_count - claims <= 3
    finally:
        await worker.shutdown(grace=5)
        await running


async def test_workers_sharing_a_budget_never_start_more_than_it(store: Store) -> None:
    assert await store.definition_insert(stored(definition()))
    assert await store.definition_insert(stored(definition("other")))
    limit, burst = 20, 10
    spec = RateLimitSpec(limit, 1.0, burst)
    now = datetime.now(T0.tzinfo)
    await store.rate_limit_set("acme", GREET, spec, 1)  # the database's clock, as the claims
    limited = [new_execution(now=now) for _ in range(40)]
    free = [new_execution(d=definition("other"), now=now) for _ in range(40)]
    await store.execution_insert_many([*limited, *free])
    workers = [
        Worker(store, SystemClock(), worker_id=f"w{i}", settings=WorkerSettings(concurrency=8))
        for i in range(3)
    ]
    tasks = [asyncio.create_task(w.run()) for w in workers]

    async def done() -> bool:
        return sum(w.finished for w in workers) == 80

    began = time.monotonic()
    try:
        await _until(done, timeout=30.0)
    finally:
        for w in workers:
            await w.shutdown(grace=5)
        await asyncio.gather(*tasks)
    took = time.monotonic() - began
    # 40 limited: 10 at once, then 20 a second: at least 1.5 s; the others did not wait.
    assert took >= 1.4
    starts = []
    for e in limited:
        got = await store.execution_get("acme", e.execution_id)
        assert got is not None and got.status is ExecutionStatus.SUCCEEDED
        assert got.started_at is not None
        starts.append(got.started_at)
    starts.sort()
    first = starts[0]
    # The token bucket's bound: by t seconds after the first start, at most burst + limit * t.
    for n, at in enumerate(starts, start=1):
        elapsed = (at - first).total_seconds()
        assert n <= burst + limit * elapsed + 1e-6, (n, elapsed)
    # And so at most limit + burst in any one-second window.
    for i, at in enumerate(starts):
        within = sum(1 for s in starts[i:] if (s - at).total_seconds() < 1.0)
        assert within <= limit + burst
