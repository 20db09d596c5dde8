"""The scheduler: moves due SCHEDULED and RETRY_WAIT executions to READY.

Unleased (``tickwheel server``, one process) it serves every shard. Leased (``tickwheel
scheduler``, any number of processes) it serves only the shards it holds a lease on, and every
promotion is fenced by the lease's epoch in the database.

For the shards it serves it keeps the SCHEDULED executions due in the next ``window`` (30 s) in a
timing wheel, loaded by a bounded walk of the due index, and fires each at its instant by a
batched conditional update by id. The wheel is a cache; the database stays the truth:

- it is extended every ``window / 3``, and rebuilt on start, on lease changes (the entries of
  shards given up are dropped) and whenever due hints may have been missed;
- executions inserted inside the loaded window arrive as due hints (shard, executeAt), through
  LISTEN/NOTIFY on PostgreSQL and in-process on SQLite; the hints of a round are loaded at once
  (one query for all their slivers of their shards), and their ids wait in the wheel like the
  window's; an insert too spread to list becomes a marker that loads its span when it begins;
- every extension (and, leased, every lease renewal) first runs the catch-all, the due query
  over the served shards, which promotes whatever is overdue and was missed (inserted while no
  scheduler ran, a hint lost);
- RETRY_WAIT executions are not cached: the retry index is asked for the next one within the
  window's period, again when that answer runs out, the window is refreshed, shards are taken
  over or a DUE signal says a retry may have been stored since.

A shard whose window holds more than ``batch`` executions is loaded a page at a time: the last
row of a full page carries a marker that loads the next page when its instant comes."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Hashable, Iterator, Sequence
from datetime import datetime, timedelta

from tickwheel.domain.clock import Clock
from tickwheel.domain.models import ShardLease
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.engine.herds import (
    DIRECT_GRACE,
    DIRECT_MIN,
    FIRST_CHUNK,
    WAKE_TURNS,
    HerdOpening,
    _Deferred,
    one_kind,
)
from tickwheel.engine.service import Service
from tickwheel.engine.shard_leasing import ShardLeasing, shard_target
from tickwheel.engine.timing_wheel import Due, TimingWheel
from tickwheel.engine.wheel_window import (
    InstantShards,
    WheelWindow,
    _Armed,
    _Fire,
    _Load,
)
from tickwheel.services.settings import SchedulerSettings
from tickwheel.store.due import HINT_HORIZON, DefinitionKey, DueHints, DueSlice, Promotion
from tickwheel.store.protocol import SchedulerStore, Topic

__all__ = ["ALL_SHARDS", "DIRECT_GRACE", "DIRECT_MIN", "Scheduler", "shard_target"]

ALL_SHARDS: tuple[int, ...] = tuple(range(SHARD_COUNT))
# An id the wheel fired but the database did not promote is tried again after 20, 40, ... ms
# (the database's clock may lag ours), then left to the catch-all: it was cancelled, or
# promoted by someone else, most likely.
RETRY_FIRST = timedelta(milliseconds=20)
RETRY_TRIES = 6
# How long before the wheel's next instant the scheduler wakes to take that instant's entries
# out of the wheel (``arm``), so that at the instant itself it only promotes: taking 2,000
# entries out and sorting them costs ~3 ms of Python, 100,000 about 150 ms.
ARM_LEAD = timedelta(milliseconds=50)
# An instant's batches after its first go out on this many connections at once.
PROMOTE_LANES = 2
# After an instant's first batch, the turns of the event loop given to a worker of this process
# (``WAKE_TURNS``, herds.py), then at most this long for the claim it sent (``claim_back``) to
# come back before the instant's next batches go out: on two busy cores those batches' statements
# took the CPU the herd's first claim needed (8 rows claimed in 26-33 ms beside them, 12 without,
# docs/scaling.md, "The herd's prepared connections and its first claim alone").
CLAIM_HOLD = timedelta(milliseconds=50)


PROBE_EVERY = timedelta(seconds=1)  # breakers to probe, executions to expire
PASSES_SHARD = 0
"""Leased, the holder of this shard runs the passes any one scheduler may run for all
(``runs_passes``)."""


class Scheduler(Service, WheelWindow, ShardLeasing, HerdOpening):
    name = "scheduler"
    store: SchedulerStore  # ShardLeasing needs only its ShardLeaseStore part
    direct = True
    """Leased: open an instant's shards to the plain claim instead of promoting its rows at once
    (``DIRECT_GRACE``), when it has ``direct_min`` due entries or more, all of one tenant and one
    priority. Unleased (one scheduler over every shard, no grants to fence an opening with) it
    promotes as before."""
    direct_min = DIRECT_MIN

    def __init__(
        self,
        store: SchedulerStore,
        clock: Clock | None = None,
        *,
        shards: Sequence[int] = ALL_SHARDS,
        leased: bool = False,
        owner: str | None = None,
        settings: SchedulerSettings = SchedulerSettings(),
    ) -> None:
        super().__init__(clock, owner=owner)
        if not timedelta(0) < settings.window <= HINT_HORIZON:
            raise ValueError(f"the window must be within 0 and {HINT_HORIZON.total_seconds()} s")
        self.store = store
        self.shards = list(shards)
        self.batch = settings.batch
        self.max_sleep = settings.max_sleep
        self.promoted = 0
        self.leased = leased
        self.lease_ttl = settings.shard_lease
        # Renew at a third of the lease: two renewals may fail (a slow database) before expiry.
        self.renew_every = settings.shard_lease / 3
        self.window = settings.window
        # Extend at a third of the window: the wheel always holds at least two thirds ahead.
        self._next_probe: datetime | None = None
        self.refresh_every = self.window / 3
        self.leases: dict[int, ShardLease] = {}
        self.fenced_shards = 0  # promotion rounds' shards refused by the epoch fence
        self.refused = 0  # due executions those refusals left to the shards' new owners
        self._next_maintenance: datetime | None = None
        self.wheel: TimingWheel | None = None
        self._hints: DueHints | None = None
        self._keys: dict[int, set[Hashable]] = defaultdict(set)  # shard -> its wheel keys
        self._loaded: set[int] = set()  # shards whose window is in the wheel
        self._paged: set[int] = set()  # shards whose window continues in a _Load marker
        self.loaded_until: datetime | None = None
        self._next_refresh: datetime | None = None
        self._retry_at: datetime | None = None
        self._retry_until: datetime | None = None  # how far the last retry question looked
        self._due_poked = False  # a DUE signal came since the last retry question
        self._armed: _Armed | None = None
        # Shards opened to the claims -> the end of their latest grace: the catch-all leaves
        # them to the claims until then.
        self._open_until: dict[int, datetime] = {}
        self._instants = InstantShards()  # per instant in the wheel: entries, shards, kind
        self._opened_now: set[int] = set()  # shards opened by this round, at its ``now``
        # What the claims were left of each opened herd: promoted once its grace is over.
        self._deferred: list[_Deferred] = []
        # Told the definitions of the executions loaded into the wheel (a worker beside it).
        self.definitions_ahead: Callable[[Collection[DefinitionKey]], None] | None = None
        # Waits (at most the seconds given) for the claim in flight of a worker beside it.
        self.claim_back: Callable[[float], Awaitable[None]] | None = None
        if leased:
            self.shards = []

    async def run_once(self) -> int:
        """One round: hints into the wheel; the catch-all and the window's extension when their
        time has come; due retries; the wheel's due executions; leased, lease maintenance."""
        now = self.clock.now()
        if self.wheel is None:
            self.wheel = TimingWheel(now)
            self._hints = self.store.due_hints()
        lost, hinted = self._take_hints(now)
        if hinted:
            # Loaded now, not at their instant: the ids wait in the wheel and fire by themselves,
            # so a herd's instant starts with its promotion instead of a load of its slices.
            await self._load_slices(hinted)
        maintain = self.leased and (self._next_maintenance is None or now >= self._next_maintenance)
        # The wheel fires first: what it holds is due now, and the catch-all then finds only
        # what it missed. Both come before lease maintenance on purpose: a scheduler resumed
        # after a pause promotes with the grants it still believes in, and the database's epoch
        # fence, not this process's view, decides that it moves nothing where it lost them.
        total = await self._fire(now)
        # Not at every lease renewal: the window and the catch-all have their own period (a third
        # of the window), and shards taken over are served right after the renewal below. Both
        # at every renewal were most of an idle scheduler's cost (docs/scaling.md, "What an idle
        # scheduler costs").
        refresh = (
            lost
            or self._next_refresh is None
            or now >= self._next_refresh
            or not self._loaded.issuperset(self.shards)
        )
        if refresh:
            total += await self._sweep()
            await self._load(now, rebuild=lost)
            total += await self._fire(now)
        if refresh or self._retry_stale(now):
            self._retry_at = await self._next_retry(now)
        if self._retry_at is not None and self._retry_at <= now:
            total += await self._sweep()
            self._retry_at = await self._next_retry(now)
        if self.runs_passes and (self._next_probe is None or now >= self._next_probe):
            await self._probe_breakers()
            self._next_probe = now + PROBE_EVERY
        if maintain:
            await self.maintain_leases()
            # Short of its share (just started, or others have yet to give shards up), it asks
            # again soon rather than a renewal later: the split settles in about a second.
            short = len(self.leases) < self.target
            self._next_maintenance = now + (self.renew_every / 4 if short else self.renew_every)
            taken = [s for s in self.shards if s not in self._loaded]
            if taken:
                self._retry_until = None  # their retries too, at the next round
                # Shards taken over are served at once, not at the next round: what fell due
                # during the handover first, then their window.
                total += await self._sweep(only=taken)
                await self._load(now, rebuild=False)
                total += await self._fire(now)
        return total

    @property
    def runs_passes(self) -> bool:
        """Whether this scheduler runs the passes over every shard that one scheduler may run
        for all (the breakers' probe, startBy's expiry, and this process's reaper: each row moves
        once whoever runs them). Unleased it is the only one; leased, the holder of
        ``PASSES_SHARD``. Every process ran each of them every second: with two, twice the
        statements an idle system needed (docs/scaling.md, "What an idle scheduler costs"). When
        the holder dies, the shard's next holder runs them within a shard lease (10 s), sooner
        than a dead worker's executions' leases (30 s) expire for its reaper."""
        return not self.leased or PASSES_SHARD in self.leases

    async def _probe_breakers(self) -> None:
        """Breakers past their cool-down let a probe through; executions past their startBy
        end EXPIRED; any scheduler may (each row moves once). One read says which has work
        (``flow_passes_due``): asked every second and nearly always of nothing, the two passes
        themselves were two statements, and on SQLite a write transaction, every second."""
        due = await self.store.flow_passes_due(self.store_now())
        if due.breakers:
            for definition_uri in await self.store.circuit_breaker_probe(self.store_now()):
                self.metrics.breaker_transition(definition_uri, "half_open")
        if due.expiry:
            for execution in await self.store.execution_expire_due(self.store_now()):
                self.metrics.expired(execution.definition_uri)

    # -- the catch-all --------------------------------------------------------------------------

    async def _sweep(self, only: Sequence[int] | None = None) -> int:
        """The due query over the served shards (or ``only`` those), in bounded batches until
        a batch comes back short."""
        total = 0
        wanted = None if only is None else set(only)  # (a list of up to 1,024 shards)
        while True:
            if self.leased:
                graced = self._in_grace() if wanted is None else set()
                leases = [
                    g
                    for s, g in self.leases.items()
                    if (wanted is None or s in wanted) and s not in graced
                ]
                if not leases:
                    return total
                result = await self.store.execution_promote_due_leased(
                    self.owner, leases, self.batch, self.store_now()
                )
                self._fenced(result)
            else:
                shards = self.shards if only is None else list(only)
                if not shards:
                    return total
                result = await self.store.execution_promote_due(
                    shards, self.batch, self.store_now()
                )
            total += self._count(result)
            if result.promoted < self.batch:
                return total

    def _in_grace(self) -> set[int]:
        """Shards opened to the claims less than ``DIRECT_GRACE`` ago: the catch-all over every
        grant leaves their due rows to the claims until their promotion comes (the wheel holds
        it). A shard taken over or fenced is swept whole (``only``): nothing of it is left."""
        now = self.clock.now()
        for shard in [s for s, until in self._open_until.items() if until <= now]:
            del self._open_until[shard]
        return set(self._open_until)

    def _retry_stale(self, now: datetime) -> bool:
        """Whether the next retry must be asked for again: the last answer covered up to
        ``_retry_until``, and a retry stored since then (a DUE signal: ``DueNews.poked``) or a
        shard served since then may come before it."""
        return self._due_poked or self._retry_until is None or now >= self._retry_until

    async def _next_retry(self, now: datetime) -> datetime | None:
        """The earliest RETRY_WAIT row of the shards served due within the window's period.

        Asked when the last answer has run out or may be wrong (``_retry_stale``), not at every
        round: every second, it was the most frequent statement of an idle scheduler
        (docs/scaling.md, "What an idle scheduler costs")."""
        horizon = now + max(timedelta(seconds=self.max_sleep), self.refresh_every)
        self._retry_until, self._due_poked = horizon, False
        if not self.shards:
            return None
        return await self.store.execution_next_retry_at(self.shards, horizon)

    # -- the wheel (its window: engine/wheel_window.py) -----------------------------------------

    async def _fire(self, now: datetime) -> int:
        """Promotes everything the wheel holds that is due by ``now`` (the armed instant's
        entries first): markers load their slice first (what they find is due at once and fires
        in the same round)."""
        assert self.wheel is not None
        total = 0
        self._opened_now = set()
        herds = self._instants.take(now)  # taken in every mode: the counts go with the instant
        # Opened only if every entry due in this round has one tenant and one priority (a late
        # round may hold several instants, and an open shard hands out all that is due in it).
        direct = self.leased and self.direct and one_kind(herds)
        if self.leased and self.direct:
            total += await self._open_herds(herds if direct else [], now)
        armed = self._armed
        if armed is not None and armed.at <= now:
            self._armed = None
            total += await self._fire_taken(armed.loads, armed.fire, now, direct)
        while due := self.wheel.advance(now):
            loads, fire = self._take(due)
            total += await self._fire_taken(loads, fire, now, direct)
        return total

    def _take(self, due: list[Due]) -> tuple[list[_Load], dict[uuid.UUID, _Fire]]:
        """Entries handed back by the wheel, as markers to load and executions to promote."""
        loads: list[_Load] = []
        fire: dict[uuid.UUID, _Fire] = {}
        for item in due:
            payload = item.payload
            if isinstance(payload, _Load):
                self._keys[payload.slice.shard_id].discard(item.key)
                loads.append(payload)
            elif isinstance(payload, _Fire) and isinstance(item.key, uuid.UUID):
                self._keys[payload.shard_id].discard(item.key)
                fire[item.key] = payload
        return loads, fire

    async def _fire_taken(
        self, markers: list[_Load], fire: dict[uuid.UUID, _Fire], now: datetime, direct: bool
    ) -> int:
        """``direct``: this round's instants may be opened (``one_kind``)."""
        ids = list(fire)
        if direct and len(ids) >= self.direct_min:
            # A herd: its shards open to the claims (if this round's _open_herds has not opened
            # them already), then only what the claims cannot take is promoted; the rest a grace
            # later (_promote_deferred).
            await self._open({fire[i].shard_id for i in ids[: min(FIRST_CHUNK, self.batch)]}, now)
            await self._open({f.shard_id for f in fire.values()}, now)
            held = await self._held_back(fire, now)
            total = await self._promote_batches(held, fire, now, direct=True)
        else:
            total = await self._promote_batches(ids, fire, now, direct=False)
        loads: list[DueSlice] = []
        for marker in markers:
            if marker.page:
                self._paged.discard(marker.slice.shard_id)
                loads.append(self._page_rest(marker.slice))
            else:
                loads.append(marker.slice)
        await self._load_slices([s for s in loads if s.shard_id in self._loaded])
        return total

    async def _promote_batches(
        self,
        ids: list[uuid.UUID],
        fire: dict[uuid.UUID, _Fire],
        now: datetime,
        *,
        direct: bool,
        retry: bool = True,
    ) -> int:
        chunks = self._chunks(ids)
        first = next(chunks, None)
        total = 0 if first is None else await self._promote_ids(first, fire, now, direct, retry)
        if total and len(ids) > len(first or ()):
            # A worker of this process was woken by the commit (an in-process signal): a few
            # turns of the event loop let it send its claim before the next batches are built
            # and sent (~1 ms of this loop's time ahead of the herd's first claim).
            for _ in range(WAKE_TURNS):
                await asyncio.sleep(0)
            if self.claim_back is not None:
                # ... and its claim the cores until it is back (CLAIM_HOLD at most): what the
                # next batches make READY is claimed after it anyway.
                await self.claim_back(CLAIM_HOLD.total_seconds())
        if first is not None and len(ids) > len(first):
            # The rest on PROMOTE_LANES connections at once, each taking the next batch when
            # its last one committed: the batches are disjoint, fenced and guarded each on its
            # own, so their order between lanes does not matter; one commit no longer waits for
            # the one before (a batch of 500 waited 40-60 ms for its turn during a herd).
            async def lane() -> int:
                promoted = 0
                for chunk in chunks:
                    promoted += await self._promote_ids(chunk, fire, now, direct, retry)
                return promoted

            try:
                async with asyncio.TaskGroup() as group:
                    lanes = [group.create_task(lane()) for _ in range(PROMOTE_LANES)]
            except* Exception as failed:
                # The round fails as it would have with one lane (a database outage is told
                # apart by its own exception, not by a group): the first error, the other lane
                # already cancelled.
                raise failed.exceptions[0] from None
            total += sum(t.result() for t in lanes)
        return total

    def arm(self, now: datetime) -> int:
        """Shortly before the wheel's next instant (``ARM_LEAD``): takes that instant's entries
        out of the wheel now, so that the round at the instant starts with its promotion. Only
        the one next instant, and only before it: nothing is promoted earlier than it would be
        without arming (the round fires them once ``now`` reaches it, and the database still
        guards every row on its own due time). Returns how many entries it took."""
        if self.wheel is None or self._armed is not None:
            return 0
        at = self.wheel.next_due()
        if at is None or at <= now or at - now > ARM_LEAD:
            return 0
        if self.leased and self.direct and self._instants.openable(at) >= self.direct_min:
            # A herd of one tenant and one priority: its shards open at the instant from the
            # wheel's count (_open_herds) and its entries are taken out then, after the opening,
            # not before it (taking 100,000 out costs over a second of this loop, which would
            # hold the opening back). Any other instant is armed and promoted as before.
            return 0
        due = self.wheel.advance(at)  # the earliest instant: exactly its entries
        loads, fire = self._take(due)
        self._armed = _Armed(at, loads, fire)
        return len(due)

    def _chunks(self, ids: list[uuid.UUID]) -> Iterator[list[uuid.UUID]]:
        """The ids in promotion batches, earliest due first, the first ones small: each batch
        commits (and wakes the workers) on its own, and an UPDATE of 500 rows takes 10-20 ms, so
        a herd's first rows are READY after a batch of ``FIRST_CHUNK`` instead; the batches then
        grow fourfold up to ``batch``."""
        size, start = min(FIRST_CHUNK, self.batch), 0
        while start < len(ids):
            yield ids[start : start + size]
            start += size
            size = min(size * 4, self.batch)

    async def _promote_ids(
        self,
        ids: list[uuid.UUID],
        fire: dict[uuid.UUID, _Fire],
        now: datetime,
        direct: bool,
        retry: bool,
    ) -> int:
        """``direct``: the shards are open, and the rows the claims take as they are stay
        SCHEDULED; every id not promoted is deferred (``DIRECT_GRACE``), instead of the retries
        of a firing the database's clock refused. ``retry`` False: no retry (a deferred
        promotion: what it does not find was claimed or cancelled)."""
        if self.leased:
            shards = {fire[i].shard_id for i in ids}
            leases = [self.leases[s] for s in shards if s in self.leases]
            if not leases:
                return 0
            result = await self.store.execution_promote_ids_leased(
                self.owner, leases, ids, self.store_now(), direct=direct
            )
            if direct:
                self._defer([i for i in ids if i not in result.moved], fire, now)
            if result.fenced:
                # Some grants are lost: the catch-all over every grant finds out which, counts
                # what they refuse, and drops them (one report for the lot).
                promoted = self._count(result)
                return promoted + await self._sweep()
        else:
            result = await self.store.execution_promote_ids(ids, self.shards, self.store_now())
        for execution_id in ids:
            entry = fire[execution_id]
            if execution_id in result.moved or direct or not retry:
                continue
            if entry.tries + 1 >= RETRY_TRIES:
                continue
            if entry.shard_id in self._loaded:
                later = now + RETRY_FIRST * 2**entry.tries
                retry_entry = _Fire(entry.shard_id, entry.tries + 1, entry.limited)
                self._add(execution_id, later, retry_entry, entry.shard_id)
        return self._count(result)

    def _count(self, result: Promotion) -> int:
        self.promoted += result.promoted
        self.metrics.promotions(result.by_definition())
        return result.promoted

    def _fenced(self, result: Promotion) -> None:
        if not result.fenced:
            return
        self.fenced_shards += len(result.fenced)
        self.refused += result.refused
        self.metrics.fenced(len(result.fenced), result.refused)
        self.log.warning(
            "promotion fenced: %d shard lease(s) of %s lost (epoch or expiry); "
            "refused %d due execution(s) there, promoted 0 in those shards",
            len(result.fenced),
            self.owner,
            result.refused,
        )
        self._drop(result.fenced)

    # -- leases ---------------------------------------------------------------------------------

    def _drop(self, shard_ids: Sequence[int]) -> None:
        for shard_id in shard_ids:
            self.leases.pop(shard_id, None)
            self._open_until.pop(shard_id, None)
        self._forget(shard_ids)
        self.shards = sorted(self.leases)

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            if self.leased:
                try:
                    await self.release_all()
                except Exception:  # the leases expire anyway; never mask the shutdown
                    self.log.warning("could not release shard leases of %s", self.owner)

    # -- sleeping -------------------------------------------------------------------------------

    async def sleep_seconds(self) -> float:
        """Until the first of: the wheel's next instant, the next retry, the window's next
        extension, the next lease renewal; never longer than ``max_sleep``."""
        now = self.clock.now()
        wake = now + timedelta(seconds=self.max_sleep)
        next_due = self.wheel.next_due() if self.wheel is not None else None
        armed = self._armed.at if self._armed is not None else None
        maintenance = self._next_maintenance if self.leased else None
        deferred = self._deferred[0].at if self._deferred else None
        for at in (armed, next_due, self._retry_at, self._next_refresh, maintenance, deferred):
            if at is not None and at < wake:
                wake = at
        return max(0.0, (wake - now).total_seconds())

    async def idle(self, did: int) -> None:
        delay = await self.sleep_seconds()
        if delay <= 0 or self.stopping:
            return
        # An insert (a due hint) or a new retry ends the wait early (a round then follows).
        early = self._arm_in()
        if early is not None and early < delay:
            if early > 0 and await self.store.wait_for(Topic.DUE, early):
                return
            self.arm(self.clock.now())
            delay = await self.sleep_seconds()
            if delay <= 0 or self.stopping:
                return
        await self.store.wait_for(Topic.DUE, delay)

    def _arm_in(self) -> float | None:
        """Seconds until the next instant should be armed; None when nothing is to arm."""
        if self.wheel is None or self._armed is not None:
            return None
        at = self.wheel.next_due()
        if at is None:
            return None
        return max(0.0, (at - ARM_LEAD - self.clock.now()).total_seconds())
