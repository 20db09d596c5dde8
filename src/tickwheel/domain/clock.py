"""One injectable clock. Services and the in-process client read time only through a ``Clock``
so that tests can move time by hand instead of sleeping."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Protocol


def iso(value: datetime | None) -> str | None:
    """RFC 3339, UTC as ``Z``: the API's one spelling of an instant."""
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware, in UTC."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """A clock that only moves when a test says so. ``sleep`` advances it instead of waiting, so
    code under test that sleeps returns at once and sees the time it expected."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware start")

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float = 0.0, **kwargs: float) -> datetime:
        self._now += timedelta(seconds=seconds, **kwargs)
        return self._now

    def set(self, instant: datetime) -> None:
        if instant.tzinfo is None:
            raise ValueError("FakeClock needs timezone-aware instants")
        self._now = instant.astimezone(UTC)

    async def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))
        await asyncio.sleep(0)


def store_now(clock: Clock) -> datetime | None:
    """The ``now`` handed to the store's time-dependent writes: None with the system clock, so
    that the database's clock decides (nodes with skewed clocks still agree); a test's fake
    clock otherwise."""
    return None if isinstance(clock, SystemClock) else clock.now()
