"""A scheduler's share of the shards: renewing its leases, giving up or taking shards until it
holds its fair share, handing them back at shutdown. Mixed into ``Scheduler``, which supplies the
store, its grants and what to drop from its wheel when shards are given up.

No coordinator: every scheduler reads the same live membership (``shard_owners``) and computes
the same shares; PostgreSQL's row locks decide who gets a free shard."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from tickwheel.domain.models import ShardLease
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.store.protocol import ShardLeaseStore


def shard_target(owner: str, owners: Sequence[str]) -> int:
    """This owner's fair share of the shards among ``owners`` (it included): every owner gets
    ``SHARD_COUNT // n`` and the first ``SHARD_COUNT % n`` by name one more, so the shares add
    up to exactly SHARD_COUNT (3 owners: 342, 341, 341) and all owners agree without talking."""
    ranked = sorted({*owners, owner})
    base, extra = divmod(SHARD_COUNT, len(ranked))
    return base + (1 if ranked.index(owner) < extra else 0)


class ShardLeasing:
    store: ShardLeaseStore
    owner: str
    leases: dict[int, ShardLease]
    shards: list[int]
    lease_ttl: timedelta
    log: logging.Logger
    target = SHARD_COUNT  # this owner's fair share, as of the last lease round

    def store_now(self) -> datetime | None:
        raise NotImplementedError  # Service's, earlier in the scheduler's bases

    def _drop(self, shard_ids: Sequence[int]) -> None:
        raise NotImplementedError  # the scheduler's: forget the grants and their wheel entries

    def _forget(self, shard_ids: Sequence[int]) -> None:
        raise NotImplementedError  # the scheduler's: drop the shards' wheel entries

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
            kept = {lease.shard_id for lease in renewed}
            self._forget([lease.shard_id for lease in held if lease.shard_id not in kept])
        self.leases = {lease.shard_id: lease for lease in renewed}
        counts = await self.store.shard_lease_counts(now)
        target = self.target = shard_target(self.owner, list(counts))
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
                # A takeover needs no explicit rescan: the next round sees shards it has not
                # loaded, runs the due query over them (every row due up to now, whatever the
                # watermark says) and then loads their window.
                self.log.info("%s took %d shard(s) (target %d)", self.owner, len(taken), target)
        self.shards = sorted(self.leases)

    async def release_all(self) -> None:
        """At shutdown: hand every shard back at once rather than after the lease expires."""
        held = list(self.leases.values())
        self._drop(list(self.leases))
        await self.store.shard_lease_release(self.owner, held, self.store_now(), leaving=True)
