"""A cron job's schedule: the domain's cron math (``domain/cron.py``) bounded by the job's
``startAt``/``endAt``, read in the windows the service works in.

Everything here goes through ``fire_previews``, not bare fire times, because the service must
also see the occurrences a DST rule kept from firing (to record them, with the reason) and the
ones it moved (to say so beside the execution).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from tickwheel.domain.cron import (
    CronExpression,
    DstPolicy,
    FirePreview,
    fire_previews,
    parse_expression,
    parse_timezone,
)
from tickwheel.domain.cron_jobs import CronJobSpec

CHUNK = 64
TINY = timedelta(microseconds=1)


@lru_cache(maxsize=4096)
def _parsed(expression: str, timezone: str) -> tuple[CronExpression, ZoneInfo]:
    """Every tick of every job reads its schedule; parse each expression and zone once."""
    return parse_expression(expression), parse_timezone(timezone)


@lru_cache(maxsize=16384)
def _previews(
    expr: CronExpression, tz: ZoneInfo, after: datetime, count: int, policy: DstPolicy
) -> tuple[FirePreview, ...]:
    """``fire_previews``, remembered: a herd of jobs on one schedule (50,000 ``* * * * *``
    jobs all due at the same minute) asks the same question once per job and tick, and the
    DST explanation behind each answer costs more than the rest of a job's plan. Pure, so a
    cached answer is the answer; an entry is a few rows, so the cache stays small."""
    return tuple(fire_previews(expr, tz, after, count, policy))


@dataclass(frozen=True)
class Window:
    """Occurrences in a window, in order, fired and not: ``complete`` is False when a limit cut
    it short, and then ``rows[-1]`` is where to continue from."""

    rows: list[FirePreview]
    complete: bool

    @property
    def firing(self) -> list[FirePreview]:
        return [row for row in self.rows if row.fires]


class Schedule:
    def __init__(self, spec: CronJobSpec) -> None:
        self.spec = spec
        self.expr, self.tz = _parsed(spec.expression, spec.timezone)

    def _in_bounds(self, at: datetime) -> bool:
        s = self.spec
        return (s.start_at is None or at >= s.start_at) and (s.end_at is None or at <= s.end_at)

    def _start(self, after: datetime) -> datetime:
        """``after``, moved up to just before ``startAt`` if it is earlier."""
        if self.spec.start_at is not None and after < self.spec.start_at:
            return self.spec.start_at - TINY
        return after

    def window(self, after: datetime, until: datetime, limit: int) -> Window:
        """Occurrences strictly after ``after`` and at or before ``until``, stopping after
        ``limit`` firing ones."""
        rows: list[FirePreview] = []
        fired = 0
        cursor = self._start(after)
        end = until if self.spec.end_at is None else min(until, self.spec.end_at)
        size = 4  # most windows hold one or two fire times: read few, then more
        while cursor < end:
            chunk = _previews(self.expr, self.tz, cursor, size, self.spec.dst_policy)
            for row in chunk:
                if row.at > end:
                    return Window(rows, True)
                if not self._in_bounds(row.at):
                    continue
                if row.fires and fired == limit:
                    return Window(rows, False)
                rows.append(row)
                fired += row.fires
            if not chunk or sum(row.fires for row in chunk) < size:
                return Window(rows, True)  # the expression has no more matches
            cursor = chunk[-1].at
            size = min(size * 2, CHUNK)
        return Window(rows, True)

    def next_fire(self, after: datetime) -> tuple[datetime | None, list[FirePreview]]:
        """The first firing instant strictly after ``after`` (None: none before ``endAt``), and
        the occurrences before it that a DST rule kept from firing."""
        cursor = self._start(after)
        skipped: list[FirePreview] = []
        while True:
            chunk = _previews(self.expr, self.tz, cursor, 1, self.spec.dst_policy)
            for row in chunk:
                if self.spec.end_at is not None and row.at > self.spec.end_at:
                    return None, skipped
                if not self._in_bounds(row.at):
                    continue
                if row.fires:
                    return row.at, skipped
                skipped.append(row)
            if not any(row.fires for row in chunk):
                return None, skipped
            cursor = chunk[-1].at

    def last_firing(self, after: datetime, before: datetime, limit: int) -> tuple[Window, bool]:
        """The last ``limit`` firing occurrences strictly after ``after`` and strictly before
        ``before`` (with the DST rows among them), and whether earlier ones exist that were
        left out.

        A service that was down for a week must not walk a week of every-second occurrences
        to find the latest: it looks back through windows that grow eightfold from a minute,
        so the work follows ``limit``, not the length of the outage."""
        width = timedelta(minutes=1)
        while True:
            low = max(after, before - width)
            window = self.window(low, before - TINY, 1_000_000)
            firing = window.firing
            if len(firing) >= limit or low <= after:
                break
            width *= 8
        if len(firing) > limit:
            first_kept = firing[-limit]
            rows = [r for r in window.rows if r.at >= first_kept.at]
            return Window(rows, True), True
        earlier = low > after and self.window(after, low, 1).firing != []
        return window, earlier

    def upcoming(self, after: datetime, count: int) -> list[FirePreview]:
        """The next ``count`` fire times strictly after ``after`` within the job's bounds, with
        the occurrences a DST rule moved or kept from firing among them (for people to read)."""
        rows: list[FirePreview] = []
        fired = 0
        cursor = self._start(after)
        while fired < count:
            chunk = fire_previews(self.expr, self.tz, cursor, count - fired, self.spec.dst_policy)
            for row in chunk:
                if self.spec.end_at is not None and row.at > self.spec.end_at:
                    return rows
                if self._in_bounds(row.at):
                    rows.append(row)
                    fired += row.fires
            if not any(row.fires for row in chunk):
                return rows
            cursor = chunk[-1].at
        return rows
