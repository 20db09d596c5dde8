"""The pruner: deletes terminal executions (SUCCEEDED, FAILED, CANCELLED, EXPIRED) that finished
longer ago than the retention period, with their attempts, events and outputs; and by the same
period the Cron Service's history rows and audit trail (a job's newest history row is always kept).

It deletes in bounded batches, each its own short transaction, looping until a batch comes back
short: a backlog of millions never becomes one long transaction that holds locks, bloats the
write-ahead log or stalls the claimers that share the database. Several pruners may run at once
(one per scheduler process): each batch skips rows another one holds.

The cut-off comes from this node's clock, not the database's: a retention period is days long,
so a skew of seconds between nodes changes nothing that matters."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from tickwheel.domain.clock import Clock
from tickwheel.domain.states import TERMINAL
from tickwheel.engine.service import Service
from tickwheel.services.settings import PrunerSettings
from tickwheel.store.factory import cron_store_for
from tickwheel.store.protocol import Store

if TYPE_CHECKING:  # the cron tables' store (and the cron domain) load at the first pass
    from tickwheel.store.cron_protocol import CronStore

DEFAULT_BATCH = PrunerSettings.batch
"""Also the batch of ``tickwheel prune``."""


class Pruner(Service):
    name = "pruner"

    def __init__(
        self,
        store: Store,
        clock: Clock | None = None,
        *,
        cron: CronStore | None = None,
        settings: PrunerSettings = PrunerSettings(),
    ) -> None:
        super().__init__(clock)
        retention, batch = settings.retention, settings.batch
        if retention <= timedelta(0):
            raise ValueError("retention must be positive (a retention of 0 runs no pruner)")
        if batch < 1:
            raise ValueError("batch must be at least 1")
        self.store = store
        self._cron = cron
        self.retention = retention
        self.batch = batch
        self.interval = settings.interval
        self.first_after = settings.first_after
        self.pruned = 0

    def cutoff(self) -> datetime:
        return self.clock.now() - self.retention

    @property
    def cron(self) -> CronStore:
        """The cron tables on the same database, found on first use (not in ``__init__``)."""
        if self._cron is None:
            self._cron = cron_store_for(self.store)
        return self._cron

    async def run_once(self) -> int:
        """One round: executions, then cron history and audit rows; returns all rows deleted."""
        cutoff = self.cutoff()
        total = await prune(self.store, cutoff, self.batch, stopping=lambda: self.stopping)
        self.pruned += total
        self.metrics.pruned.inc(total)
        if total:
            self.log.info("pruned %d executions finished before %s", total, cutoff)
        rows = await prune_cron(self.cron, cutoff, self.batch, stopping=lambda: self.stopping)
        if rows:
            self.log.info("pruned %d cron history and audit rows from before %s", rows, cutoff)
        return total + rows

    async def run(self) -> None:
        # Not at the process's start, which is for the first claims and promotions: the first
        # pass deletes in batches and loads the cron tables' store, and a retention period is
        # days long.
        await self.pause(self.first_after)
        await super().run()

    async def idle(self, did: int) -> None:
        # Hourly is plenty: a retention period is days long, and one round clears the backlog.
        await self.pause(self.interval)


async def prune(
    store: Store,
    finished_before: datetime,
    batch: int = DEFAULT_BATCH,
    *,
    stopping: Callable[[], bool] | None = None,
) -> int:
    """Deletes every terminal execution finished before ``finished_before``, ``batch`` at a
    time, until a batch comes back short (or ``stopping()`` says so); returns how many."""
    total = 0
    while True:
        deleted = await store.execution_prune(finished_before, batch)
        total += deleted
        if deleted < batch or (stopping is not None and stopping()):
            return total
        await asyncio.sleep(0)  # let the claims and heartbeats of this process through


async def count_prunable(store: Store, finished_before: datetime) -> int:
    """How many executions ``prune`` would delete now (for a dry run): all terminal ones, less
    those finished since the cut-off."""
    everything = await store.execution_count_by_status(None)
    recent = await store.execution_count_by_status(finished_before)
    return sum(everything[s] - recent[s] for s in TERMINAL)


async def prune_cron(
    cron: CronStore,
    before: datetime,
    batch: int = DEFAULT_BATCH,
    *,
    stopping: Callable[[], bool] | None = None,
) -> int:
    """Deletes cron history rows (never a job's newest) and audit rows older than ``before``,
    ``batch`` of each at a time, each batch its own short transaction; returns how many."""
    total = 0
    while True:
        deleted = await cron.cron_history_prune(before, batch)
        total += deleted
        if deleted < batch or (stopping is not None and stopping()):
            return total
        await asyncio.sleep(0)
