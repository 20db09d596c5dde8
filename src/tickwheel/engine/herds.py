"""A herd's shards opened to the plain claim, mixed into the scheduler: at a big instant the
scheduler opens the instant's shards so that the claims take its rows as they are (SCHEDULED ->
RUNNING) instead of promoting them first; a grace later what the claims left is promoted and the
shards close (docs/scaling.md, "Claiming a herd without promoting it", "Emptied shards closed
at every grace", "A herd's grace in one statement")."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from tickwheel.domain.models import ShardLease
from tickwheel.engine.wheel_window import Instant, _Fire
from tickwheel.store.protocol import SchedulerStore

# The first promotion batch of an instant (then 4x, 16x, ... up to the scheduler's batch): 8
# rows commit in 2.1-2.9 ms against 3.6-7.7 for 32 on an idle database, and the herd's first
# start waits on this batch alone (docs/scaling.md, "The herd's first milliseconds").
FIRST_CHUNK = 8
# Turns of the event loop given, after an instant's first batch, to a worker of this process.
WAKE_TURNS = 8


# Leased, an instant's shards are opened to the plain claim, which takes their due rows as they
# are (SCHEDULED -> RUNNING); what the claims have not taken this long after is promoted to
# READY, so that the claims that do not take SCHEDULED rows (limits, fairness across tenants)
# see it, and the shards close (docs/scaling.md, "Claiming a herd without promoting it").
DIRECT_GRACE = timedelta(seconds=1)
# ... for an instant with at least this many due entries in this scheduler's shards. Below it
# the promotion is as quick (B5's herd of 2,000 over two schedulers: all READY in 70-110 ms,
# against all claimable in 160-240 ms opened, and a later first start, the first claim then
# taking two statements), and an instant costs one statement where an opening costs three
# (open, the look for pauses and rate limits with the direct promotion of what they or a
# concurrency limit hold, a grace later the count and close in one). 100,000: all
# claimable in 0.4 s opened against 11-20 s promoted (docs/scaling.md, "Claiming a herd without
# promoting it"); between the two not measured. And only when every entry of the instant has
# one tenant and one priority: the claims take an open shard's rows in shard order, and an
# instant of several tenants or priorities is promoted, for the claims to serve by turns and
# priority.
DIRECT_MIN = 5000
# Shards of a herd whose rows a grace counts whole (the lowest still open); the others are only
# probed for one row left. Counting every row left at every grace read all that the claims had
# not taken yet: 150-500 ms of the database's CPU a second of B3's drain (docs/scaling.md, "A
# herd's grace counts a sample"). The claims take a herd's rows across its shards, so a sample
# shows their progress; when it shows none, the whole count decides, as before.
GRACE_SAMPLE = 16


@dataclass(slots=True)
class _Deferred:
    """A herd's entries its instant left SCHEDULED for the claims (shards opened through
    ``opened``): at ``at`` what is still there is promoted, then the shards close."""

    at: datetime
    opened: datetime
    ids: list[uuid.UUID]
    fire: dict[uuid.UUID, _Fire]
    left: int = 0
    """How many were due in its open shards at the last look, counted over ``sample`` (at
    first: how many it left)."""
    shards: set[int] = field(default_factory=set)
    """The shards of ``ids``."""
    closed: set[int] = field(default_factory=set)
    """Those of ``shards`` closed since (emptied by the claims): not asked again."""
    sample: tuple[int, ...] = ()
    """The shards counted whole at the last grace, over which ``left`` was counted (the others
    1 each if not emptied); none before the first."""
    whole: int = -1
    """The last whole count (the opening's, ``left``, until a grace counts whole)."""
    opened_in: Counter[int] | None = None
    """How many of ``ids`` each shard held at the opening (made at the first new sample)."""


class HerdOpening:
    """Opening, grace checks and closing of a herd's shards. The attributes are the
    scheduler's."""

    store: SchedulerStore
    owner: str
    leases: dict[int, ShardLease]
    direct_min: int
    _open_until: dict[int, datetime]
    _opened_now: set[int]
    _deferred: list[_Deferred]

    if TYPE_CHECKING:

        def store_now(self) -> datetime | None: ...

        async def _promote_batches(
            self,
            ids: list[uuid.UUID],
            fire: dict[uuid.UUID, _Fire],
            now: datetime,
            *,
            direct: bool,
            retry: bool = True,
        ) -> int: ...

    async def _open_herds(self, herds: list[Instant], now: datetime) -> int:
        """At a herd's instant, before its entries leave the wheel: its shards open to the
        claims, from the wheel's count of them (``InstantShards``), the first few first (the
        workers wake at the first statement). Then the herd's deferred promotions that are due."""
        wanted: set[int] = set()
        for herd in herds:
            if herd.n >= self.direct_min:
                wanted |= herd.shards
        if wanted:
            ordered = sorted(wanted)
            await self._open(set(ordered[:FIRST_CHUNK]), now)
            for _ in range(WAKE_TURNS):  # as after a first promotion (_promote_batches)
                await asyncio.sleep(0)
            await self._open(wanted, now)
        return await self._promote_deferred(now)

    async def _open(self, shards: set[int], now: datetime) -> None:
        """Opens ``shards`` to the plain claim through ``now`` (fenced, never past the
        database's clock); those this round opened already are not asked again."""
        leases = [self.leases[s] for s in sorted(shards - self._opened_now) if s in self.leases]
        if not leases:
            return
        held = await self.store.shard_lease_open(self.owner, leases, now, self.store_now())
        until = now + DIRECT_GRACE
        for shard in held:
            self._open_until[shard] = until
        self._opened_now.update(held)

    async def _promote_deferred(self, now: datetime) -> int:
        """Herds whose grace is over. While the claims are taking a herd's rows (fewer are due
        in its open shards than a grace ago) it gets another grace: promoting them would rewrite
        every row the claims are about to take. Once a grace passes with none taken (the claims
        that apply limits or fairness take no SCHEDULED row, or no worker runs them) what is
        left is promoted, READY for those claims. At every grace the herd's shards where nothing
        due is left close, unless opened again since (their own herd closes them): those the
        claims emptied while the others are still drained, which every plain claim would walk
        until the whole herd is done (docs/scaling.md, "Emptied shards closed at every grace"),
        then, once the herd is done, the rest. The count and the close are one statement
        (``shard_lease_grace``; docs/scaling.md, "A herd's grace in one statement"). The count
        is of a sample of the herd's shards (``GRACE_SAMPLE``), the others probed for one row
        left; the whole herd is counted only when the sample shows no progress."""
        total = 0
        due = [h for h in self._deferred if h.at <= now]
        self._deferred = [h for h in self._deferred if h.at > now]
        for herd in due:
            shards = sorted(s for s in herd.shards - herd.closed if s in self.leases)
            if herd.whole < 0:
                herd.whole = herd.left  # the opening's count
            # The last grace's sample less the shards it closed (they counted 0), so that the
            # counts compare; a new one when none is left (the first grace among them).
            kept = tuple(s for s in herd.sample if s not in herd.closed and s in self.leases)
            sample = kept or tuple(shards[:GRACE_SAMPLE])
            left = sampled = await self._grace(herd, shards, sample)
            before = herd.left if kept else self._opened_in(herd, sample, len(shards))
            drained = 0 < left < before
            if left and not drained and len(sample) < len(shards):
                # No progress in the sample: the whole count decides, against the last one.
                left = await self._grace(herd, shards, None)
                drained = 0 < left < herd.whole
                herd.whole = left
            if left and not drained:
                # The shards just closed hold no row of the herd still SCHEDULED: skipped.
                ids = [i for i in herd.ids if herd.fire[i].shard_id not in herd.closed]
                total += await self._promote_batches(ids, herd.fire, now, direct=False, retry=False)
                # Then those the promotion emptied close (its count is not needed).
                await self._grace(herd, [s for s in shards if s not in herd.closed], ())
            if drained:
                herd.left, herd.sample, herd.at = sampled, sample, now + DIRECT_GRACE
                for shard in shards:
                    if shard not in herd.closed:
                        self._open_until[shard] = max(self._open_until.get(shard, now), herd.at)
                self._deferred.append(herd)
        self._deferred.sort(key=lambda d: d.at)
        return total

    async def _grace(
        self, herd: _Deferred, shards: Collection[int], counted: Collection[int] | None
    ) -> int:
        """One statement: how many rows due by the herd's opening are left in ``shards`` (the
        herd's, still held, not closed yet; those of a shard not in ``counted`` 1 if any, all
        when None), and those of them where none is left close; fenced, and a shard opened again
        by a later herd stays open (both in ``shard_lease_grace``). Those closed are not asked
        again."""
        leases = [self.leases[s] for s in sorted(shards) if s in self.leases]
        if not leases:
            return 0
        left, closed = await self.store.shard_lease_grace(
            self.owner, leases, herd.opened, self.store_now(), counted=counted
        )
        herd.closed.update(closed)
        return left

    @staticmethod
    def _opened_in(herd: _Deferred, sample: tuple[int, ...], asked: int) -> int:
        """What a grace over a new ``sample`` (of ``asked`` shards) is compared with: what the
        opening left in it, and 1 for each other shard (at most what it counts there)."""
        if herd.opened_in is None:
            fire = herd.fire
            herd.opened_in = Counter(fire[i].shard_id for i in herd.ids)
        return sum(herd.opened_in[s] for s in sample) + asked - len(sample)

    async def _held_back(self, fire: dict[uuid.UUID, _Fire], now: datetime) -> list[uuid.UUID]:
        """Those of an opened herd's entries that its direct promotion must read: the others are
        deferred at once, as that promotion would have deferred them (the claims' rows).

        With no pause and no rate limit anywhere (one look), only the rows under a concurrency
        limit (known from the wheel's entries) and those of a shard this round did not open
        (the fenced promotion finds out why). Reading all 100,000 of B3's herd by primary key
        to promote none took the scheduler ~0.9 s of CPU and its backends ~0.4 s in the herd's
        first two seconds, beside the claims on two cores (docs/scaling.md, "The herd's drain
        against a plain drain"). A pause or rate limit made after the look holds its rows back
        from the claims all the same (their direct source skips them), and the herd's grace
        promotes them once the claims stop taking rows, as for one made during the promotion."""
        if await self.store.flow_controls_present():
            return list(fire)
        opened = self._opened_now
        held: list[uuid.UUID] = []
        claims: list[uuid.UUID] = []
        shards: set[int] = set()
        # One pass over the entries, no lookup by id: hashing a UUID is a Python call, and a
        # herd's 100,000 ids were looked up twice more here and in _defer.
        for execution_id, entry in fire.items():
            if entry.limited or entry.shard_id not in opened:
                held.append(execution_id)
            else:
                claims.append(execution_id)
                shards.add(entry.shard_id)
        self._defer(claims, fire, now, shards)
        return held

    def _defer(
        self,
        ids: list[uuid.UUID],
        fire: dict[uuid.UUID, _Fire],
        now: datetime,
        shards: set[int] | None = None,
    ) -> None:
        """What a herd's direct promotion left SCHEDULED (the claims' rows, or rows they have
        taken already) is promoted ``DIRECT_GRACE`` later if still there: one list per batch,
        not an entry each back in the wheel (100,000 additions cost ~0.5 s of this loop). The
        grants are looked up then: shards given up meanwhile are left to their new owner.
        ``shards``: those of ``ids``, when the caller has them already."""
        if not ids:
            return
        if shards is None:
            shards = {fire[i].shard_id for i in ids}
        last = self._deferred[-1] if self._deferred else None
        if last is not None and last.opened == now and last.fire is fire:
            last.ids += ids  # the same herd's next batch: one promotion and one close later
            last.left += len(ids)
            last.shards |= shards
            return
        self._deferred.append(_Deferred(now + DIRECT_GRACE, now, ids, fire, len(ids), shards))
        self._deferred.sort(key=lambda d: d.at)


def one_kind(instants: list[Instant]) -> bool:
    """Whether every entry of these instants (one round's) has the same tenant and the same
    priority. Only then may a herd's shards open: the claims take open rows shard after shard,
    which would serve a herd of several tenants in proportion to their counts for its whole
    drain (the fair claim takes no SCHEDULED row) and start a high-priority row of it behind
    default ones; promoted, its rows are claimed by tenant turns, highest priority first."""
    kinds = {instant.kind for instant in instants}
    return None not in kinds and len(kinds) <= 1
