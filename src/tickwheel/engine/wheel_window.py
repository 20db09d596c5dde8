"""The scheduler's window: which SCHEDULED executions its timing wheel holds, loaded by bounded
walks of the due index (the window, its pages, the due hints' slivers and spans), and dropped for
shards no longer served. Mixed into ``Scheduler`` (engine/scheduler.py), which fires the wheel
and promotes."""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tickwheel.engine.timing_wheel import TimingWheel
from tickwheel.store.due import DefinitionKey, DueEntry, DueHints, DueSlice
from tickwheel.store.protocol import SchedulerStore

# A fresh shard's window starts this far back: the catch-all that runs first has promoted what
# was due by the database's clock, and rows between its clock and ours are loaded and fired.
LOAD_MARGIN = timedelta(seconds=1)
# A hint's instant is rounded up to the millisecond: its sliver reaches back this far.
HINT_SLIVER = timedelta(milliseconds=1)
# A hint is loaded at once when the wheel holds nothing yet of its shard at its instant, or when
# that instant is nearer than this; otherwise its load waits in the wheel (a marker) for half
# the time left, and the hints of that shard and instant meanwhile are taken by the same load.
# A sliver reads every row of its shard at its instant, and a herd inserted inside the window
# in many commits was read again at each: 20,000 in 20 batches, ~140,000 rows read
# (docs/scaling.md, "A herd inserted inside the window").
HINT_AT_ONCE = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class _Fire:
    """A loaded execution (keyed by its id)."""

    shard_id: int
    tries: int = 0
    limited: bool = False
    """Under a concurrency limit (``DueEntry.limited``)."""


@dataclass(slots=True)
class Instant:
    """What the wheel holds for one instant: how many entries, in which shards, and the tenant
    and priority of its first entry (``mixed`` once another differs)."""

    tenant: str
    priority: int
    n: int = 0
    mixed: bool = False
    shards: set[int] = field(default_factory=set)

    @property
    def kind(self) -> tuple[str, int] | None:
        """(tenant, priority) shared by every entry; None when they differ."""
        return None if self.mixed else (self.tenant, self.priority)


class InstantShards:
    """Per instant the wheel holds executions for: how many, in which shards, and whether they
    are all of one tenant and one priority. Kept as they are added (a set insertion and a
    comparison each), so that at a herd's instant the scheduler opens its shards to the claims
    before it takes the herd's entries out of the wheel (~11 µs each here: over a second for
    100,000), and only for a herd the claims can take in shard order without serving one tenant
    or priority before another. Only a hint: an entry dropped or moved meanwhile leaves its
    count, and opening a shard with nothing due in it claims nothing (the catch-all closes it)."""

    def __init__(self) -> None:
        self._heap: list[datetime] = []
        self._at: dict[datetime, Instant] = {}

    def note(self, at: datetime, shard: int, tenant: str, priority: int) -> None:
        entry = self._at.get(at)
        if entry is None:
            entry = self._at[at] = Instant(tenant, priority)
            heapq.heappush(self._heap, at)
        elif not entry.mixed and (entry.priority != priority or entry.tenant != tenant):
            entry.mixed = True
        entry.n += 1
        entry.shards.add(shard)

    def holds(self, at: datetime, shard: int) -> bool:
        """Whether entries of ``shard`` at ``at`` were noted (and the instant not taken yet)."""
        entry = self._at.get(at)
        return entry is not None and shard in entry.shards

    def count(self, at: datetime) -> int:
        entry = self._at.get(at)
        return 0 if entry is None else entry.n

    def openable(self, at: datetime) -> int:
        """How many entries the instant holds if they are all of one tenant and one priority;
        0 if not (the scheduler then promotes it, fairly and by priority)."""
        entry = self._at.get(at)
        return 0 if entry is None or entry.mixed else entry.n

    def take(self, now: datetime) -> list[Instant]:
        """The instants due by ``now``, forgotten."""
        taken: list[Instant] = []
        while self._heap and self._heap[0] <= now:
            taken.append(self._at.pop(heapq.heappop(self._heap)))
        return taken


@dataclass(frozen=True, slots=True)
class _Load:
    """A marker: load this slice when its instant comes: a spread insert's span, or the rest of a
    shard's window after a full page (``page``)."""

    slice: DueSlice
    page: bool = False


@dataclass(slots=True)
class _Armed:
    """The wheel's next instant, taken out ahead of it (``Scheduler.arm``): fired at ``at``."""

    at: datetime
    loads: list[_Load]
    fire: dict[uuid.UUID, _Fire]


class WheelWindow:
    """The wheel's contents per shard. The attributes are the scheduler's."""

    store: SchedulerStore
    shards: list[int]
    batch: int
    window: timedelta
    refresh_every: timedelta
    wheel: TimingWheel | None
    _hints: DueHints | None
    _due_poked: bool
    _keys: dict[int, set[Hashable]]
    _loaded: set[int]
    _paged: set[int]
    _armed: _Armed | None
    _instants: InstantShards
    loaded_until: datetime | None
    _next_refresh: datetime | None
    definitions_ahead: Callable[[Collection[DefinitionKey]], None] | None

    async def _load(self, now: datetime, *, rebuild: bool) -> None:
        """Extends the window to ``now + window``: from where it ended for the shards loaded,
        from a little before now for shards new to this scheduler (or all, to rebuild)."""
        if rebuild:
            self._armed = None  # its rows are read again below
            self._forget(list(self._keys))
            self._loaded.clear()
            self._paged.clear()
        until = now + self.window
        old_until = self.loaded_until
        slices = []
        for shard in self.shards:
            if shard in self._paged:
                continue  # its next page's marker loads up to the current end when it fires
            if shard in self._loaded and old_until is not None:
                if old_until < until:
                    slices.append(DueSlice(shard, old_until, until))
            else:
                slices.append(DueSlice(shard, now - LOAD_MARGIN, until))
        self.loaded_until = until if old_until is None else max(old_until, until)
        self._next_refresh = now + self.refresh_every
        await self._load_slices(slices)
        self._loaded.update(self.shards)

    async def _load_slices(self, slices: Sequence[DueSlice]) -> None:
        assert self.wheel is not None
        if not slices:
            return
        pages = await self.store.execution_due_window(slices, self.batch)
        # Rows armed for the next instant are out of the wheel, not forgotten: a sliver that
        # reads them again must not fire them twice.
        armed = self._armed.fire if self._armed is not None else {}
        definitions: set[DefinitionKey] = set()
        wheel = self.wheel
        for part, rows in zip(slices, pages, strict=True):
            for row in rows:
                if row.definition is not None:
                    definitions.add(row.definition)
                if row.execution_id in armed:
                    continue
                held = wheel.due_of(row.execution_id)
                if held == row.execute_at:
                    # Read again (a later hint of its shard and instant): held as it is. Counted
                    # again, it would make a herd of an instant read often enough.
                    continue
                fire = _Fire(row.shard_id, limited=row.limited)
                self._add(row.execution_id, row.execute_at, fire, row.shard_id)
                if held is None:
                    self._instants.note(row.execute_at, row.shard_id, row.tenant, row.priority)
            if len(rows) == self.batch:
                self._next_page(part, rows[-1])
        if definitions and self.definitions_ahead is not None:
            # A worker of this process reads them now, before their instant, not after the
            # instant's first claim (a fresh process's first herd waited 2-7 ms on that read).
            self.definitions_ahead(definitions)

    def _next_page(self, part: DueSlice, last: DueEntry) -> None:
        """A full page: the rest of the slice is loaded when the wheel reaches its last row."""
        rest = DueSlice(part.shard_id, last.execute_at, part.until, last.execution_id)
        key = ("page", part.shard_id, last.execute_at, last.execution_id)
        self._add(key, last.execute_at, _Load(rest, page=True), part.shard_id)
        self._paged.add(part.shard_id)

    def _take_hints(self, now: datetime) -> tuple[bool, list[DueSlice]]:
        """The due hints for the shards served, inside the loaded window: their slivers to load
        at once, or as markers (one per shard and instant, halfway to it) for a shard whose
        rows at that instant the wheel holds already (``HINT_AT_ONCE``); True when some may
        have been missed (the wheel is then rebuilt)."""
        if self._hints is None:
            return False, []
        news = self._hints.take()
        self._due_poked |= news.poked  # (and its next retry asked again: scheduler.py)
        if news.lost:
            return True, []
        if self.loaded_until is None:
            return False, []
        # A hint comes after its insert committed, so its sliver can be read now, however far
        # ahead its instant: one query per round for all of them, seconds before a herd's
        # instant rather than on it (loading hundreds of slivers at the instant, then firing
        # what they found, was most of a herd's first start). What the sliver holds that is
        # already in the wheel (a page or an earlier hint loaded it) replaces its entry.
        assert self.wheel is not None
        slivers: set[DueSlice] = set()
        for shard, at in news.pairs:
            if shard not in self._loaded or at > self.loaded_until:
                continue
            part = DueSlice(shard, at - HINT_SLIVER, at)
            ahead = at - now
            if ahead <= HINT_AT_ONCE or not self._instants.holds(at, shard):
                slivers.add(part)
                continue
            key = ("hint", shard, at)
            if key not in self.wheel:  # else its load is to come: it reads these rows too
                self._add(key, now + ahead / 2, _Load(part), shard)
        for first, last in news.spans:
            # An insert too spread to list: when its span begins, load the span of every shard
            # (what is not due yet is kept in the wheel at its own instant).
            until = min(last, self.loaded_until)
            for shard in self._loaded if first <= until else ():
                part = DueSlice(shard, first - HINT_SLIVER, until)
                self._add(("span", shard, first, until), first, _Load(part), shard)
        return False, sorted(slivers, key=lambda c: (c.until, c.shard_id))

    def _add(self, key: Hashable, due: datetime, payload: object, shard: int) -> None:
        assert self.wheel is not None
        self.wheel.add(key, due, payload)
        self._keys[shard].add(key)

    def _forget(self, shard_ids: Sequence[int]) -> None:
        """Drops the wheel's entries of shards no longer served (armed ones too)."""
        armed = self._armed
        if armed is not None and shard_ids:
            gone = set(shard_ids)
            armed.fire = {k: f for k, f in armed.fire.items() if f.shard_id not in gone}
            armed.loads = [m for m in armed.loads if m.slice.shard_id not in gone]
        for shard in shard_ids:
            for key in self._keys.pop(shard, ()):
                if self.wheel is not None:
                    self.wheel.remove(key)
            self._loaded.discard(shard)
            self._paged.discard(shard)

    def _page_rest(self, rest: DueSlice) -> DueSlice:
        """A page marker's slice reaches the window's current end, extended since it was set."""
        until = self.loaded_until if self.loaded_until is not None else rest.until
        return DueSlice(rest.shard_id, rest.after_at, max(until, rest.until), rest.after_id)
