"""An in-memory hierarchical hashed timing wheel (Varghese & Lauck, scheme 7): the scheduler's
cache of the executions due in its next window. Pure: no I/O, no clock; time is passed in.

Design. Time is cut into ticks (10 ms by default) counted from the Unix epoch. Four levels of
slots, aligned on absolute tick numbers the way the Linux timer wheel is:

    level 0: 256 slots of 1 tick        (2.56 s at 10 ms)
    level 1:  64 slots of 256 ticks     (2 min 44 s)
    level 2:  64 slots of 16,384 ticks  (2 h 55 min)
    level 3:  64 slots of 1,048,576 ticks (7.8 days)
    overflow: a plain dict for anything further out

An item lives at the lowest level whose block (the span all its slots cover) holds both the item's
tick and the current tick, so every item at level L is later than every item below L. When the
current tick enters a new block of level L-1, the one slot of level L that covers it is emptied
into the levels below ("cascade"); an item moves at most four times in its life. ``add`` and
``remove`` are O(1); ``advance`` costs the ticks walked plus the items it returns or cascades, and
jumps over empty stretches a block at a time, so a long pause (or a fake clock) costs little.

Ticks only decide where an item is kept. The due instant of each item is kept exactly, in
microseconds: ``advance(now)`` returns exactly the items with ``due <= now`` and leaves the rest
of the current tick's slot in place, and ``next_due()`` is the exact earliest instant, so a
scheduler sleeps until the item's instant, not to a tick boundary."""

from __future__ import annotations

from collections.abc import Hashable
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Any

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
# Bits of tick number that each level's slot index takes: 256 slots, then 64 per level.
_BITS = (8, 6, 6, 6)
# A level-L block covers 2**_BLOCK[L] ticks; a level-L slot (L >= 1) covers 2**_BLOCK[L-1].
_BLOCK = (8, 14, 20, 26)
_LEVELS = len(_BITS)
_OVERFLOW = _LEVELS
# Per level: the shift and mask that turn a tick number into a slot index.
_SHIFT = (0, *_BLOCK[:-1])
_MASK = tuple((1 << bits) - 1 for bits in _BITS)
_BY_SEQ = attrgetter("seq")
_BY_DUE = attrgetter("due_us")


def to_us(instant: datetime) -> int:
    """Microseconds since the epoch: exact, and ordered like the instants."""
    if instant.tzinfo is None:
        raise ValueError("the timing wheel needs timezone-aware instants")
    return (instant - _EPOCH) // _US


class Due:
    """An item: kept in the wheel while it waits, handed back by ``advance`` once removed (the
    wheel keeps no reference to it then). The wheel's own entry is handed back, not a copy: a
    herd of 100,000 made a frozen dataclass each, ~90 ms of the scheduler's loop at its instant
    (docs/scaling.md, "The herd's drain against a plain drain"). ``key``, ``due`` and
    ``payload`` are the caller's; the rest is the wheel's bookkeeping."""

    __slots__ = ("due", "due_us", "key", "level", "payload", "seq", "slot")

    def __init__(self, key: Hashable, due: datetime, due_us: int, payload: Any, seq: int) -> None:
        self.key = key
        self.due = due
        self.due_us = due_us
        self.payload = payload
        self.seq = seq
        self.level = 0
        self.slot = 0


class TimingWheel:
    """Items keyed by any hashable (an execution id, a marker tuple); adding a key that is
    present replaces it."""

    def __init__(self, start: datetime, tick: timedelta = timedelta(milliseconds=10)) -> None:
        self._tick_us = tick // _US
        if self._tick_us <= 0:
            raise ValueError("the tick must be at least a microsecond")
        self._cur = to_us(start) // self._tick_us
        self._slots: list[list[dict[Hashable, Due]]] = [
            [{} for _ in range(1 << bits)] for bits in _BITS
        ]
        self._overflow: dict[Hashable, Due] = {}
        self._counts = [0] * (_LEVELS + 1)
        self._entries: dict[Hashable, Due] = {}
        self._seq = 0
        self._next: int | None = None  # cached earliest due (us); None: unknown or empty
        self._next_known = True

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def due_of(self, key: Hashable) -> datetime | None:
        """The instant the item is held for; None when it is not held."""
        entry = self._entries.get(key)
        return None if entry is None else entry.due

    def add(self, key: Hashable, due: datetime, payload: Any = None) -> None:
        self.remove(key)
        due_us = to_us(due)
        self._seq += 1
        entry = Due(key, due, due_us, payload, self._seq)
        self._entries[key] = entry
        self._place(entry)
        if self._next_known and (self._next is None or due_us < self._next):
            self._next = due_us

    def remove(self, key: Hashable) -> Any:
        """Forgets the item; returns its payload (None when it was not there)."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        self._unplace(entry)
        if self._next_known and entry.due_us == self._next:
            self._next_known = False
        return entry.payload

    def next_due(self) -> datetime | None:
        """The exact earliest due instant held, or None when empty."""
        if not self._next_known:
            self._next = self._find_next()
            self._next_known = True
        if self._next is None:
            return None
        return _EPOCH + self._next * _US

    def advance(self, now: datetime) -> list[Due]:
        """Removes and returns every item due at or before ``now``, earliest first (ties in the
        order they were added). Time never goes back: an earlier ``now`` than before only
        returns what is due by it."""
        now_us = to_us(now)
        target = now_us // self._tick_us
        out: list[Due] = []
        while self._cur < target:
            self._step(target, out)
        current = self._slots[0][self._cur & 0xFF]
        if current:
            ready = [e for e in current.values() if e.due_us <= now_us]
            if len(ready) == len(current):
                current.clear()  # a herd's slot, due whole: one clear, not a removal each
            else:
                for entry in ready:
                    del current[entry.key]
            self._counts[0] -= len(ready)
            out += ready
        if not out:
            return out
        entries = self._entries
        for entry in out:
            del entries[entry.key]
        self._next_known = False
        # Two stable sorts on one attribute each: no key tuple per entry to build and compare.
        out.sort(key=_BY_SEQ)
        out.sort(key=_BY_DUE)
        return out

    # -- internals ----------------------------------------------------------------------------

    def _step(self, target: int, out: list[Due]) -> None:
        """Moves the current tick toward ``target`` by at most one block, collecting every item
        of the ticks it leaves behind (all of them due: their tick is before ``target``)."""
        cur = self._cur
        if self._counts[0]:
            block_end = ((cur >> _BLOCK[0]) + 1) << _BLOCK[0]
            stop = min(block_end, target)
            slots = self._slots[0]
            for tick in range(cur, stop):
                slot = slots[tick & 0xFF]
                if slot:
                    out.extend(slot.values())
                    self._counts[0] -= len(slot)
                    slot.clear()
            self._cur = stop
            if stop == block_end:
                self._cascade()
            return
        # Nothing at level 0: jump to the next boundary where a higher level cascades, i.e. the
        # end of the current block of the level below the lowest non-empty one.
        lowest = next((lv for lv in range(1, _LEVELS + 1) if self._counts[lv]), None)
        if lowest is None:
            self._cur = target
            return
        size = _BLOCK[lowest - 1]
        boundary = ((cur >> size) + 1) << size
        if lowest == _OVERFLOW:
            # Far items only: go straight to the block of the earliest of them.
            first = min(e.due_us for e in self._overflow.values()) // self._tick_us
            boundary = max(boundary, (first >> _BLOCK[-1]) << _BLOCK[-1])
        self._cur = min(boundary, target)
        if self._cur == boundary:
            self._cascade()

    def _cascade(self) -> None:
        """At the start of a new block: empties, highest level first, the one slot of each
        higher level that covers the new block, re-placing its items relative to now."""
        cur = self._cur
        if cur & ((1 << _BLOCK[-1]) - 1) == 0 and self._counts[_OVERFLOW]:
            moving = [e for e in self._overflow.values() if self._level_of(e) < _OVERFLOW]
            for entry in moving:
                self._unplace(entry)
                self._place(entry)
        for level in range(_LEVELS - 1, 0, -1):
            if cur & ((1 << _BLOCK[level - 1]) - 1):
                continue  # not a boundary of the block this level's slots cascade into
            slot = self._slots[level][(cur >> _BLOCK[level - 1]) & ((1 << _BITS[level]) - 1)]
            if slot:
                for entry in list(slot.values()):
                    self._unplace(entry)
                    self._place(entry)

    def _level_of(self, entry: Due) -> int:
        tick = entry.due_us // self._tick_us
        cur = self._cur
        if tick <= cur:
            return 0
        for level, block in enumerate(_BLOCK):
            if tick >> block == cur >> block:
                return level
        return _OVERFLOW

    def _place(self, entry: Due) -> None:
        level = self._level_of(entry)
        entry.level = level
        if level == _OVERFLOW:
            self._overflow[entry.key] = entry
        else:
            # An item already due is kept in the current tick's slot: the next advance returns it.
            tick = entry.due_us // self._tick_us
            if tick < self._cur:
                tick = self._cur
            entry.slot = (tick >> _SHIFT[level]) & _MASK[level]
            self._slots[level][entry.slot][entry.key] = entry
        self._counts[level] += 1

    def _unplace(self, entry: Due) -> None:
        if entry.level == _OVERFLOW:
            del self._overflow[entry.key]
        else:
            del self._slots[entry.level][entry.slot][entry.key]
        self._counts[entry.level] -= 1

    def _find_next(self) -> int | None:
        """Level by level, the first non-empty slot at or after the current position; its items
        are all earlier than those of any later slot or higher level, so its minimum is exact."""
        for level in range(_LEVELS):
            if not self._counts[level]:
                continue
            shift = 0 if level == 0 else _BLOCK[level - 1]
            mask = (1 << _BITS[level]) - 1
            start = (self._cur >> shift) & mask
            slots = self._slots[level]
            for index in range(start, mask + 1):
                if slots[index]:
                    return min(e.due_us for e in slots[index].values())
        if self._overflow:
            return min(e.due_us for e in self._overflow.values())
        return None
