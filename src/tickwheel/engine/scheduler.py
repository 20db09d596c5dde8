"""The scheduler: moves due SCHEDULED and RETRY_WAIT executions to READY.

Unleased (``tickwheel server``, one process) it promotes over every shard. Leased
(``tickwheel scheduler``, any number of processes) it promotes only over the shards it holds a
lease on, and every promotion is fenced by the lease's epoch in the database. It sleeps until the
earliest due time it knows of (never longer than ``max_sleep``) and is woken early when an
execution is inserted that may be due sooner."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from tickwheel.domain.clock import Clock
from tickwheel.domain.models import ShardLease
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.engine.service import Service
from tickwheel.store.protocol import Store, Topic

ALL_SHARDS: tuple[int, ...] = tuple(range(SHARD_COUNT))


def shard_target(owner: str, owners: Sequence[str]) -> int:
    """This owner's fair share of the shards among ``owners`` (it included): every owner gets
    ``SHARD_COUNT // n`` and the first ``SHARD_COUNT % n`` by name one more, so the shares add
    up to exactly SHARD_COUNT (3 owners: 342, 341, 341) and all owners agree without talking."""
    ranked = sorted({*owners, owner})
    base, extra = divmod(SHARD_COUNT, len(ranked))
    return base + (1 if ranked.index(owner) < extra else 0)


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
        leased: bool = False,
        owner: str | None = None,
        lease_ttl: float = 10.0,
    ) -> None:
        super().__init__(clock)
        self.store = store
        self.shards = list(shards)
        self.batch = batch
        self.max_sleep = max_sleep
        self.promoted = 0
        self.leased = leased
        self.owner = owner or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.lease_ttl = timedelta(seconds=lease_ttl)
        # Renew at a third of the lease: two renewals may fail (a slow database) before expiry.
        self.renew_every = timedelta(seconds=lease_ttl / 3)
        self.leases: dict[int, ShardLease] = {}
        self.fenced_shards = 0  # promotion rounds' shards refused by the epoch fence
        self.refused = 0  # due executions those refusals left to the shards' new owners
        self._next_maintenance: datetime | None = None
        if leased:
            self.shards = []

    async def run_once(self) -> int:
        """Promotes in bounded batches until a batch comes back short (nothing more is due);
        leased, it then renews, takes and gives up shard leases when their time has come."""
        total = await (self._promote_leased() if self.leased else self._promote())
        self.promoted += total
        self.metrics.promoted.inc(total)
        now = self.clock.now()
        if self.leased and (self._next_maintenance is None or now >= self._next_maintenance):
            self._next_maintenance = now + self.renew_every
            await self.maintain_leases()
        return total

    async def _promote(self) -> int:
        total = 0
        while True:
            moved = await self.store.execution_promote_due(
                self.shards, self.batch, self.store_now()
            )
            total += moved
            if moved < self.batch:
                return total

    async def _promote_leased(self) -> int:
        # Promotion comes before lease maintenance on purpose: a scheduler resumed after a pause
        # promotes with the grants it still believes in, and the database's epoch fence, not
        # this process's view, decides that it moves nothing where it lost them.
        total = 0
        while self.leases:
            result = await self.store.execution_promote_due_leased(
                self.owner, list(self.leases.values()), self.batch, self.store_now()
            )
            total += result.promoted
            if result.fenced:
                self.fenced_shards += len(result.fenced)
                self.refused += result.refused
                self.log.warning(
                    "promotion fenced: %d shard lease(s) of %s lost (epoch or expiry); "
                    "refused %d due execution(s) there, promoted 0 in those shards",
                    len(result.fenced),
                    self.owner,
                    result.refused,
                )
                self._drop(result.fenced)
            if result.promoted < self.batch:
                break
        return total

    def _drop(self, shard_ids: Sequence[int]) -> None:
        for shard_id in shard_ids:
            self.leases.pop(shard_id, None)
        self.shards = sorted(self.leases)

    async def maintain_leases(self) -> None:
        """Renews what is held, then moves toward this owner's fair share: gives up the excess
        (the highest shards) or takes free and expired shards. No coordinator: every owner reads
        the same live membership and computes the same shares."""
        now = self.store_now()
        held = list(self.leases.values())
        renewed = await self.store.shard_lease_renew(self.owner, held, self.lease_ttl, now)
        lost = len(held) - len(renewed)
        if lost:
            self.log.warning("%s lost %d shard lease(s) before renewing them", self.owner, lost)
        self.leases = {lease.shard_id: lease for lease in renewed}
        counts = await self.store.shard_lease_counts(now)
        target = shard_target(self.owner, list(counts))
        if len(self.leases) > target:
            excess = sorted(self.leases)[target:]
            await self.store.shard_lease_release(self.owner, [self.leases[s] for s in excess], now)
            self._drop(excess)
            self.log.info("%s released %d shard(s) (target %d)", self.owner, len(excess), target)
        elif len(self.leases) < target:
            taken = await self.store.shard_lease_acquire(
                self.owner, target - len(self.leases), self.lease_ttl, now
            )
            self.leases.update((lease.shard_id, lease) for lease in taken)
            if taken:
                # A takeover needs no explicit rescan: the due query takes every row due up to
                # now, whatever the watermark says, so rows due during the handover come too.
                self.log.info("%s took %d shard(s) (target %d)", self.owner, len(taken), target)
        self.shards = sorted(self.leases)

    async def release_all(self) -> None:
        """At shutdown: hand every shard back at once rather than after the lease expires."""
        held = list(self.leases.values())
        self._drop(list(self.leases))
        await self.store.shard_lease_release(self.owner, held, self.store_now(), leaving=True)

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            if self.leased:
                try:
                    await self.release_all()
                except Exception:  # the leases expire anyway; never mask the shutdown
                    self.log.warning("could not release shard leases of %s", self.owner)

    async def sleep_seconds(self) -> float:
        now = self.clock.now()
        horizon = now + timedelta(seconds=self.max_sleep)
        if not self.shards:
            return self.max_sleep
        next_due = await self.store.execution_next_due_at(self.shards, horizon)
        if next_due is None:
            return self.max_sleep
        return max(0.0, min(self.max_sleep, (next_due - now).total_seconds()))

    async def idle(self, did: int) -> None:
        delay = await self.sleep_seconds()
        if delay > 0 and not self.stopping:
            # An insert due sooner than we planned signals DUE and ends the wait early.
            await self.store.wait_for(Topic.DUE, delay)
