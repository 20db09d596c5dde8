"""The scheduler: moves due SCHEDULED and RETRY_WAIT executions to READY.

Single-instance here, over every shard; the scale-out work gives each scheduler the shards it
leases. It sleeps until the earliest due time it knows of (never longer than ``max_sleep``) and
is woken early when an execution is inserted that may be due sooner."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from tickwheel.domain.clock import Clock
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.engine.service import Service
from tickwheel.store.protocol import Store, Topic

ALL_SHARDS: tuple[int, ...] = tuple(range(SHARD_COUNT))


class Scheduler(Service):
    name = "scheduler"

    def __init__(
        self,
        store: Store,
        clock: Clock | None = None,
        *,
        shards: Sequence[int] = ALL_SHARDS,
        batch: int = 500,
        max_sleep: float = 1.0,
    ) -> None:
        super().__init__(clock)
        self.store = store
        self.shards = list(shards)
        self.batch = batch
        self.max_sleep = max_sleep
        self.promoted = 0

    async def run_once(self) -> int:
        """Promotes in bounded batches until a batch comes back short (nothing more is due)."""
        total = 0
        while True:
            moved = await self.store.execution_promote_due(
                self.shards, self.batch, self.store_now()
            )
            total += moved
            if moved < self.batch:
                break
        self.promoted += total
        self.metrics.promoted.inc(total)
        return total

    async def sleep_seconds(self) -> float:
        now = self.clock.now()
        horizon = now + timedelta(seconds=self.max_sleep)
        next_due = await self.store.execution_next_due_at(self.shards, horizon)
        if next_due is None:
            return self.max_sleep
        return max(0.0, min(self.max_sleep, (next_due - now).total_seconds()))

    async def idle(self, did: int) -> None:
        delay = await self.sleep_seconds()
        if delay > 0 and not self.stopping:
            # An insert due sooner than we planned signals DUE and ends the wait early.
            await self.store.wait_for(Topic.DUE, delay)
