"""Cron time math: parse an expression, check a timezone, list the next fire times, explain them.

Entry points (docs/cron.md): ``next_fire_times`` and ``preview`` take the expression and the
zone as strings; ``fire_times``, ``fire_time`` and ``fire_previews`` take them parsed, for a
caller that computes many. All take a ``DstPolicy`` (default: shift forward, first occurrence).

The one module that imports cronsim (pinned in pyproject.toml; docs/cron.md says why). cronsim
does the calendar: which *wall-clock* times match an expression, with the classic rules (names,
ranges, lists, steps, ``L``, ``LW``, ``#``, and day-of-month OR day-of-week). We always run it on
naive wall times, where it has no DST logic at all; ``cron_dst`` then turns each wall time into
real instants with the same rules for every form of expression (5 fields, 6 fields, macros),
and ``cron_preview`` says which of them a DST rule moved, doubled or skipped, and why.

Syntax errors are found before cronsim sees the expression (``cron_syntax``, field by field), so
that the message can say which field and which value is wrong; cronsim's own errors only name
the field.
"""

from __future__ import annotations

import calendar
import difflib
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from itertools import islice
from typing import ParamSpec, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

from tickwheel.domain.cron_dst import (
    DEFAULT_DST_POLICY,
    ONE_SECOND,
    DstPolicy,
    Occurrence,
    fire_instants,
    occurrences,
    walk_start,
)
from tickwheel.domain.cron_preview import FirePreview, explain
from tickwheel.domain.cron_syntax import (
    DAY_OF_MONTH,
    FIELDS,
    NEAREST,
    Problem,
    check_field,
    no_specific,
    six,
    split,
)
from tickwheel.domain.errors import FieldError, InvalidInput

# The names other layers use; DstPolicy and FirePreview live in cron_dst and cron_preview.
__all__ = ["DEFAULT_DST_POLICY", "CronExpression", "DstPolicy", "FirePreview"]
__all__ += ["fire_previews", "fire_time", "fire_times", "next_fire_times", "parse_expression"]
__all__ += ["parse_timezone", "preview"]

_P = ParamSpec("_P")
_T = TypeVar("_T")

# Files in the zoneinfo folder that are not IANA zones: "localtime" is whatever zone the
# machine is set to, which differs between the nodes of a cluster.
NOT_ZONES = frozenset({"localtime", "posixrules"})


@dataclass(frozen=True)
class CronExpression:
    """A valid expression. Build it with ``parse_expression``.

    ``fields`` always holds six upper-cased fields, seconds first (``"0"`` when the user wrote
    five), with macros expanded.
    """

    text: str
    fields: tuple[str, str, str, str, str, str]
    has_seconds: bool

    @property
    def follows_elapsed_time(self) -> bool:
        """True when the hour field is ``*`` or a step: the expression then fires whenever the
        clock shows a matching time (skipping a DST gap, twice in a repeated hour) instead of
        following the fixed-time rules.

        Only the hour field decides, never the minute's spelling: ``*/15 2 * * *`` is a
        fixed-hour expression like ``0,15,30,45 2 * * *``. Vixie cron and cronie call it a
        "wildcard" job because its minute starts with ``*``, and so run it not at all on the
        day 02:xx is skipped and at every 02:xx twice on the day it repeats; we keep the
        job's ``dstPolicy`` for it instead (docs/cron.md, "A fixed hour, a stepped minute")."""
        hour = self.fields[2]
        return hour.startswith("*") or "/" in hour

    @property
    def normalized(self) -> str:
        return " ".join(self.fields)

    @property
    def nearest_weekday(self) -> int | None:
        """``15W`` (day-of-month): the weekday nearest the 15th, within its month; else None."""
        found = NEAREST.match(self.fields[3])
        return int(found.group(1)) if found else None

    @property
    def calendar(self) -> str:
        """What cronsim is given: ``nW`` widened to the days its weekday can fall on (n-2 to
        n+2), which ``_wall_matches`` then narrows to the one it is."""
        day = self.nearest_weekday
        if day is None:
            return self.normalized
        fields = list(self.fields)
        fields[3] = f"{max(1, day - 2)}-{min(31, day + 2)}"
        return " ".join(fields)


def parse_expression(expression: str) -> CronExpression:
    """Validate ``expression`` (5 fields, 6 with seconds first, or a macro such as ``@daily``).
    Remembered: a ``cron apply`` of 100,000 jobs names a handful of expressions, and checking
    one with cronsim costs more than the rest of a job's validation (a bad one is not kept:
    its error is raised again)."""
    return _parse_expression(expression)


@lru_cache(maxsize=4096)
def _parse_expression(expression: str) -> CronExpression:
    text = expression.strip()
    try:
        parts = split(text)
        offset = 0 if len(parts) == 6 else 1
        fields = ("0", *parts) if offset else tuple(parts)
        for index, value in enumerate(fields[offset:], start=offset):
            check_field(index, index - offset + 1, value)
        expr = CronExpression(text, six(no_specific(fields, offset)), has_seconds=not offset)
        _check_with_library(expr, offset)
    except Problem as problem:
        raise InvalidInput(
            f"invalid cron expression {text!r}: {problem}",
            [FieldError("expression", str(problem))],
        ) from None
    return expr


def parse_timezone(name: str) -> ZoneInfo:
    """The IANA zone called ``name`` (e.g. ``Europe/Berlin``, ``UTC``)."""
    if name not in NOT_ZONES:
        # ZoneNotFoundError for a missing zone, ValueError for a malformed key ("../x", "").
        with suppress(ZoneInfoNotFoundError, ValueError):
            return ZoneInfo(name)
    message = f"unknown timezone {name!r}; {_timezone_hint(name)}"
    raise InvalidInput(message, [FieldError("timezone", message)])


def next_fire_times(
    expression: str,
    timezone: str,
    after: datetime,
    count: int,
    dst_policy: DstPolicy = DEFAULT_DST_POLICY,
) -> list[datetime]:
    """The next ``count`` instants strictly after ``after`` (aware, any offset) at which
    ``expression`` fires in the IANA zone ``timezone``: aware UTC datetimes, increasing, with
    tickwheel's DST rules (docs/cron.md). ``InvalidInput`` lists every bad argument.

    Fewer than ``count`` come back only if the expression has no further match within
    cronsim's horizon (50 years without a match, or the end of ``datetime``'s range).
    """
    expr, tz = _parse_arguments(expression, timezone, after, count)
    return fire_times(expr, tz, after, count, dst_policy)


def fire_times(
    expr: CronExpression,
    tz: ZoneInfo,
    after: datetime,
    count: int,
    dst_policy: DstPolicy = DEFAULT_DST_POLICY,
) -> list[datetime]:
    """``next_fire_times`` for an expression and a zone parsed already (once, by a caller
    that computes many)."""
    _check_arguments(after, count)
    return list(islice(fire_instants(_occurrences(expr, tz, after, dst_policy)), count))


def fire_time(
    expr: CronExpression,
    tz: ZoneInfo,
    after: datetime,
    dst_policy: DstPolicy = DEFAULT_DST_POLICY,
) -> datetime | None:
    """The first fire instant strictly after ``after``, in UTC, or None if there is none."""
    times = fire_times(expr, tz, after, 1, dst_policy)
    return times[0] if times else None


def preview(
    expression: str,
    timezone: str,
    after: datetime,
    count: int,
    dst_policy: DstPolicy = DEFAULT_DST_POLICY,
) -> list[FirePreview]:
    """The next ``count`` fire times, as ``next_fire_times`` gives them, each with its local
    time and, where a DST rule moved or doubled it, why; in between, in order, the
    occurrences a DST rule kept from firing (``fires=False``), with why."""
    expr, tz = _parse_arguments(expression, timezone, after, count)
    return fire_previews(expr, tz, after, count, dst_policy)


def fire_previews(
    expr: CronExpression,
    tz: ZoneInfo,
    after: datetime,
    count: int,
    dst_policy: DstPolicy = DEFAULT_DST_POLICY,
) -> list[FirePreview]:
    """``preview`` for an expression and a zone parsed already."""
    _check_arguments(after, count)
    found = _occurrences(expr, tz, after, dst_policy)
    elapsed, hour = expr.follows_elapsed_time, expr.fields[2]
    return explain(found, tz, count, hour_field=hour, elapsed_time=elapsed, policy=dst_policy)


def _parse_arguments(
    expression: str, timezone: str, after: datetime, count: int
) -> tuple[CronExpression, ZoneInfo]:
    """Parse and check all four arguments, reporting every problem at once."""
    problems: list[InvalidInput] = []
    expr = _collect(problems, parse_expression, expression)
    tz = _collect(problems, parse_timezone, timezone)
    _collect(problems, _check_arguments, after, count)
    if expr is None or tz is None or problems:
        errors = [error for problem in problems for error in problem.errors]
        raise InvalidInput("; ".join(problem.message for problem in problems), errors)
    return expr, tz


def _collect(
    problems: list[InvalidInput], check: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs
) -> _T | None:
    try:
        return check(*args, **kwargs)
    except InvalidInput as problem:
        problems.append(problem)
        return None


def _check_arguments(after: datetime, count: int) -> None:
    errors = []
    if after.utcoffset() is None:
        errors.append(FieldError("after", "must include a timezone or UTC offset"))
    if count < 0:
        errors.append(FieldError("count", "must be >= 0"))
    if errors:
        raise InvalidInput("; ".join(f"{e.path} {e.message}" for e in errors), errors)


def _occurrences(
    expr: CronExpression, tz: ZoneInfo, after: datetime, policy: DstPolicy
) -> Iterator[Occurrence]:
    """Every occurrence (firing or not) strictly after ``after``, in order, until the end of
    cronsim's horizon or of datetime's range (years 1 and 9999)."""
    with suppress(OverflowError):
        walls = _wall_matches(expr, walk_start(after, tz))
        found = occurrences(walls, tz, elapsed_time=expr.follows_elapsed_time, policy=policy)
        yield from (occurrence for occurrence in found if occurrence.at > after)


def _wall_matches(expr: CronExpression, start: datetime) -> Iterator[datetime]:
    """Naive wall times matching ``expr`` from ``start`` (inclusive, to the second) on.
    cronsim yields strictly after the time it is given, so give it one second less."""
    walls = CronSim(expr.calendar, start.replace(microsecond=0) - ONE_SECOND)
    day = expr.nearest_weekday
    if day is None:
        yield from walls
        return
    yield from (w for w in walls if w.day == nearest_weekday(w.year, w.month, day))


def nearest_weekday(year: int, month: int, day: int) -> int | None:
    """The day of the month ``nW`` fires on: ``day`` if a weekday, else the nearest weekday
    in the same month (a Saturday the 1st moves to Monday the 3rd, a Sunday the 31st to
    Friday the 29th). None when the month has no such day (``31W`` in April)."""
    length = calendar.monthrange(year, month)[1]
    if day > length:
        return None
    weekday = calendar.weekday(year, month, day)
    if weekday == 5:  # Saturday
        return day - 1 if day > 1 else day + 2
    if weekday == 6:  # Sunday
        return day + 1 if day < length else day - 2
    return day


def _check_with_library(expr: CronExpression, offset: int) -> None:
    """cronsim also rejects a day-of-month that no chosen month has (``0 0 30 2 *``); the
    checks above cannot know that, so ask it, and locate whatever it still refuses."""
    try:
        CronSim(expr.calendar, datetime(2000, 1, 1))
    except CronSimError as error:
        found = [i for i, field in enumerate(FIELDS) if str(error) == f"Bad {field.name}"]
        if not found:
            raise Problem(f"not accepted ({error})") from None
        index = found[0]
        value, position = expr.fields[index], index - offset + 1
        if FIELDS[index] is DAY_OF_MONTH:
            raise Problem(
                f"field {position} (day-of-month): {value!r} never occurs in the months "
                f"{expr.fields[4]!r}"
            ) from None
        raise Problem(f"field {position} ({FIELDS[index].name}): {value!r} is not valid") from None


def _timezone_hint(name: str) -> str:
    known = _zone_names()
    by_case = {zone.lower(): zone for zone in known}
    close = by_case.get(name.strip().lower())
    matches = [close] if close else difflib.get_close_matches(name.strip(), known, n=3)
    if matches:
        quoted = [repr(match) for match in matches]
        options = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
        return f"did you mean {options}?"
    return "use an IANA name such as 'Europe/Berlin', 'America/New_York' or 'UTC'"


@lru_cache(maxsize=1)
def _zone_names() -> tuple[str, ...]:
    return tuple(sorted(available_timezones() - NOT_ZONES))
