"""Time-ordered identifiers. UUIDv7 keeps new rows at the right edge of the primary key index and
makes ``execution_id`` a usable keyset-pagination cursor (newest first)."""

from __future__ import annotations

import os
import threading
import uuid
from datetime import UTC, datetime

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_lock = threading.Lock()
_last_ms = 0
_last_rand = 0


def uuid7(at: datetime) -> uuid.UUID:
    """A UUIDv7 (RFC 9562) for ``at``. Within one millisecond the 74 random bits are incremented
    rather than redrawn, so ids made by one process are strictly increasing."""
    global _last_ms, _last_rand
    with _lock:
        ms, rand = _next(_millis(at))
        _last_ms, _last_rand = ms, rand & ((1 << 74) - 1)
        rand = _last_rand
    return uuid_of(_value(ms, rand))


def uuid7_run(at: datetime, count: int) -> range | None:
    """The values (``UUID.int``) of ``count`` ids for ``at``: what ``count`` calls of ``uuid7(at)``
    in a row would give, drawn at once (a batch's items are made at one instant, so after the
    first each is the one before plus one). None when the run would carry out of ``rand_b``
    (one draw in 2**40 for a batch of 4,096) or out of the 74 random bits: the caller then
    makes each with ``uuid7``."""
    global _last_ms, _last_rand
    with _lock:
        ms, first = _next(_millis(at))
        last = first + count - 1
        if count < 1 or last >> 74 or (first & _RAND_B) + count - 1 > _RAND_B:
            return None
        _last_ms, _last_rand = ms, last
    start = _value(ms, first)
    return range(start, start + count)


def _millis(at: datetime) -> int:
    # Integer arithmetic: at.timestamp() * 1000 in floating point can land just below an exact
    # millisecond and give the one before.
    delta = at - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _next(ms: int) -> tuple[int, int]:
    """The millisecond and random bits of the next id (under ``_lock``): within the last id's
    millisecond (or a clock gone back) its bits plus one, else a fresh draw."""
    if ms <= _last_ms:
        return _last_ms, _last_rand + 1
    return ms, int.from_bytes(os.urandom(10), "big") >> 6


def _value(ms: int, rand: int) -> int:
    """The 128 bits of the UUIDv7 of ``ms`` and 74 random bits ``rand``."""
    return (
        (ms & ((1 << 48) - 1)) << 80
        | 0x7 << 76
        | (rand >> 62) << 64
        | 0b10 << 62
        | (rand & _RAND_B)
    )


_RAND_B = (1 << 62) - 1


def uuid_of(value: int) -> uuid.UUID:
    """``uuid.UUID(int=value)`` for a ``value`` of 128 bits, what ``__init__`` sets without its
    checks of which argument was given and of the range (every item of a batch takes an id:
    a third of ``uuid7``'s time; ``tests/unit/test_ids_and_sharding.py`` holds the two equal)."""
    made = _new(uuid.UUID)
    _set(made, "int", value)
    _set(made, "is_safe", _UNKNOWN)
    return made


_new = object.__new__
_set = object.__setattr__
_UNKNOWN = uuid.SafeUUID.unknown
