"""Turning local wall times into real instants: tickwheel's daylight-saving policy.

``domain/cron.py`` lists the wall-clock times an expression matches, in order, with no notion
of a timezone. This module decides which real instants those become (docs/cron.md):

* a *fixed-hour* expression (hour field neither ``*`` nor a step) fires at a wall time that
  does not exist (spring forward) once, at the first instant after the gap, and at a wall
  time that occurs twice (fall back) once, at its first occurrence;
* an *elapsed-time* expression (hour field ``*`` or a step, e.g. ``*/15 * * * *``) fires
  whenever the zone's clock shows a matching time: never inside a gap, twice in a repeated
  hour.

A wall time is classified with PEP 495's ``fold``: ``fold=0`` and ``fold=1`` give the same
instant for an ordinary time, an earlier and a later instant for a repeated time, and (in a
gap) the instants computed with the offsets before and after the transition, in reverse order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

ONE_SECOND = timedelta(seconds=1)


def wall_instants(wall: datetime, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """The UTC instants of the naive wall time ``wall`` read with ``fold=0`` and ``fold=1``."""
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    return first, second


def gap_end(wall: datetime, tz: ZoneInfo) -> datetime:
    """The first real instant after the gap that swallowed the nonexistent ``wall``.

    In a gap ``fold=1`` reads the wall time as an instant before the transition and ``fold=0``
    as one after it; the transition is the first second between them at the later offset.
    tz data has whole-second transitions, so a bisection on seconds finds it exactly.
    """
    later, earlier = wall_instants(wall, tz)
    after_offset = later.astimezone(tz).utcoffset()
    low, high = int(earlier.timestamp()), int(later.timestamp())
    while high - low > 1:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, tz).utcoffset() == after_offset:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, UTC)


def walk_start(after: datetime, tz: ZoneInfo) -> datetime:
    """The naive wall time from which to list matches so that no instant after ``after`` is
    missed.

    Usually the wall time of ``after`` itself. But if ``after`` lies in the first pass of a
    repeated interval, wall times earlier than its own still have a second occurrence later
    than ``after``; start from the beginning of the repeated interval instead.
    """
    local = after.astimezone(tz)
    wall = local.replace(tzinfo=None)
    if local.fold == 0:
        repeat = wall.replace(tzinfo=tz, fold=1).utcoffset()
        first = local.utcoffset()
        if repeat is not None and first is not None and first > repeat:
            wall -= first - repeat
    return wall


def fire_instants(
    walls: Iterable[datetime], tz: ZoneInfo, *, elapsed_time: bool
) -> Iterator[datetime]:
    """The distinct instants, in increasing order, at which the wall times ``walls`` (naive,
    increasing) fire in ``tz`` under the policy above.

    Ordering: the ``fold=0`` instants and gap ends come out non-decreasing as the wall times
    increase. Only the second occurrences of repeated times come too soon in wall order: they
    are held back until a later instant comes along (or the walls run out), and no instant
    from a later wall time can fall before them.
    """
    pending: deque[datetime] = deque()
    last: datetime | None = None
    for wall in walls:
        now, later = _resolve(wall, tz, elapsed_time)
        if now is not None:
            while pending and pending[0] <= now:
                candidate = pending.popleft()
                if last is None or candidate > last:
                    last = candidate
                    yield candidate
            if last is None or now > last:
                last = now
                yield now
        if later is not None:
            pending.append(later)
    for candidate in pending:
        if last is None or candidate > last:
            last = candidate
            yield candidate


def _resolve(
    wall: datetime, tz: ZoneInfo, elapsed_time: bool
) -> tuple[datetime | None, datetime | None]:
    """(instant to emit in order, second occurrence to hold back) for one matching wall time."""
    first, second = wall_instants(wall, tz)
    if first == second:
        return first, None
    if first < second:
        return first, (second if elapsed_time else None)
    return (None if elapsed_time else gap_end(wall, tz)), None
