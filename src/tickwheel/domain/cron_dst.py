"""Turning local wall times into real instants: tickwheel's daylight-saving rules.

``domain/cron.py`` lists the wall-clock times an expression matches, in order, with no notion
of a timezone. This module decides which real instants those become (docs/cron.md):

* a *fixed-hour* expression (hour field neither ``*`` nor a step, whatever its minute field:
  ``*/15 2 * * *`` included, unlike Vixie cron's "wildcard" rule) follows the job's
  ``DstPolicy``. A wall time that does not exist (spring forward) fires once at the first
  instant after the gap (``nonexistent: shift_forward``, the default) or not at all
  (``skip``); a wall time that occurs twice (fall back) fires at its first occurrence
  (``ambiguous: first``, the default), its second (``second``) or both (``both``);
* an *elapsed-time* expression (hour field ``*`` or a step, e.g. ``*/15 * * * *``) fires
  whenever the zone's clock shows a matching time: never inside a gap, twice in a repeated
  hour, whatever the policy.

``occurrences`` lists every candidate instant, the ones the policy keeps from firing included
(the preview explains those); ``fire_instants`` keeps the ones that fire.

A wall time is classified with PEP 495's ``fold``: ``fold=0`` and ``fold=1`` give the same
instant for an ordinary time, an earlier and a later instant for a repeated time, and (in a
gap) the instants computed with the offsets before and after the transition, in reverse order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, cast, get_args
from zoneinfo import ZoneInfo

from tickwheel.domain.errors import FieldError, InvalidInput

ONE_SECOND = timedelta(seconds=1)

Nonexistent = Literal["shift_forward", "skip"]
Ambiguous = Literal["first", "second", "both"]
#: How a wall time relates to a DST transition: None (ordinary), inside a ``gap`` (spring
#: forward), or the ``first``/``second`` occurrence of a repeated time (fall back).
Transition = Literal["gap", "first", "second"]


@dataclass(frozen=True)
class DstPolicy:
    """What a fixed-hour expression does at a DST transition (a Cron Job's ``dstPolicy``).

    ``nonexistent``: a wall time inside a spring-forward gap fires at the first instant after
    the gap (``shift_forward``) or not at all that day (``skip``). ``ambiguous``: a wall time
    that occurs twice fires at its ``first`` occurrence, its ``second``, or ``both``.
    Expressions whose hour field is ``*`` or a step ignore it: they follow elapsed time.
    """

    nonexistent: Nonexistent = "shift_forward"
    ambiguous: Ambiguous = "first"

    def __post_init__(self) -> None:
        errors = _choice_errors("dstPolicy", self.to_document())
        if errors:
            raise InvalidInput(f"invalid dstPolicy: {errors[0].path}: {errors[0].message}", errors)

    @classmethod
    def from_document(cls, document: object, path: str = "dstPolicy") -> DstPolicy:
        """Read ``{"nonexistent": ..., "ambiguous": ...}`` (camelCase API/file form). A missing
        or null document or key means the default. Every problem is reported, each located
        by ``path`` (``dstPolicy.nonexistent``, ...)."""
        if document is None:
            return DEFAULT_DST_POLICY
        if not isinstance(document, Mapping):
            message = 'must be an object such as {"nonexistent": "skip", "ambiguous": "both"}'
            raise InvalidInput(f"invalid {path}: {message}", [FieldError(path, message)])
        errors = [
            FieldError(f"{path}.{key}", "unknown field; the fields are nonexistent and ambiguous")
            for key in document
            if key not in _CHOICES
        ]
        values = {key: document.get(key) for key in _CHOICES}
        values = {key: value for key, value in values.items() if value is not None}
        errors += _choice_errors(path, values)
        if errors:
            raise InvalidInput(f"invalid {path}: {errors[0].path}: {errors[0].message}", errors)
        return cls(
            nonexistent=cast(Nonexistent, values.get("nonexistent", "shift_forward")),
            ambiguous=cast(Ambiguous, values.get("ambiguous", "first")),
        )

    @classmethod
    def from_stored(cls, document: object) -> DstPolicy:
        """``from_document`` for a row read back (a claim reads 500 at a time): the few valid
        combinations are built once and shared (the class is frozen)."""
        key = (
            (document.get("nonexistent"), document.get("ambiguous"))
            if isinstance(document, Mapping) and len(document) == 2
            else None
        )
        if key is not None and all(isinstance(value, str) for value in key):
            found = _STORED.get(key)
            if found is None:
                found = _STORED[key] = cls.from_document(document)  # an invalid one raises
            return found
        return cls.from_document(document)

    def to_document(self) -> dict[str, str]:
        return {"nonexistent": self.nonexistent, "ambiguous": self.ambiguous}


_STORED: dict[tuple[object, ...], DstPolicy] = {}


_CHOICES: dict[str, tuple[str, ...]] = {
    "nonexistent": get_args(Nonexistent),
    "ambiguous": get_args(Ambiguous),
}


def _choice_errors(path: str, values: Mapping[str, object]) -> list[FieldError]:
    errors = []
    for key, value in values.items():
        choices = _CHOICES[key]
        if not isinstance(value, str) or value not in choices:
            got = "null" if value is None else repr(value)
            options = " or ".join(repr(choice) for choice in choices)
            errors.append(FieldError(f"{path}.{key}", f"must be {options}, got {got}"))
    return errors


DEFAULT_DST_POLICY = DstPolicy()


@dataclass(frozen=True)
class Occurrence:
    """One candidate instant of one matching wall time.

    ``at`` is in UTC; for a wall time in a gap it is the end of the gap (where it fires under
    ``shift_forward``). ``fires`` is False where a rule keeps it from firing. Several
    occurrences may share an instant (wall times that all shift to the end of one gap)."""

    at: datetime
    wall: datetime
    transition: Transition | None
    fires: bool


def wall_instants(wall: datetime, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """The UTC instants of the naive wall time ``wall`` read with ``fold=0`` and ``fold=1``."""
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    return first, second


def transition_between(earlier: datetime, later: datetime, tz: ZoneInfo) -> datetime:
    """The instant of the one offset change in ``(earlier, later]``, in UTC: the first whole
    second there at ``later``'s offset. tz data has whole-second transitions, so a bisection
    on seconds finds it exactly."""
    target = later.astimezone(tz).utcoffset()
    low, high = int(earlier.timestamp()), int(later.timestamp())
    while high - low > 1:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, tz).utcoffset() == target:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, UTC)


def gap_end(wall: datetime, tz: ZoneInfo) -> datetime:
    """The first real instant after the gap that swallowed the nonexistent ``wall``.

    In a gap ``fold=1`` reads the wall time as an instant before the transition and ``fold=0``
    as one after it; the transition lies between them.
    """
    later, earlier = wall_instants(wall, tz)
    return transition_between(earlier, later, tz)


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


def occurrences(
    walls: Iterable[datetime],
    tz: ZoneInfo,
    *,
    elapsed_time: bool,
    policy: DstPolicy = DEFAULT_DST_POLICY,
) -> Iterator[Occurrence]:
    """Every candidate instant of the wall times ``walls`` (naive, increasing) in ``tz``, in
    non-decreasing order of ``at``, marked with whether it fires under the rules above. (For
    an elapsed-time expression a wall time inside a gap is no candidate: the clock never
    shows it, and real time runs on without a hole.)

    Ordering: the ``fold=0`` instants and gap ends come out non-decreasing as the wall times
    increase. Only the second occurrences of repeated times come too soon in wall order: they
    are held back until a later instant comes along (or the walls run out), and no instant
    from a later wall time can fall before them.
    """
    shift = policy.nonexistent == "shift_forward"
    fire_first = elapsed_time or policy.ambiguous != "second"
    fire_second = elapsed_time or policy.ambiguous != "first"
    pending: deque[Occurrence] = deque()
    last_gap_end: datetime | None = None
    for wall in walls:
        first, second = wall_instants(wall, tz)
        later: Occurrence | None = None
        if first == second:
            now = Occurrence(first, wall, None, True)
        elif first < second:
            now = Occurrence(first, wall, "first", fire_first)
            later = Occurrence(second, wall, "second", fire_second)
        elif elapsed_time:
            continue  # the clock never shows it: not an occurrence at all
        else:
            # All wall times of one gap end at the same instant: reuse it when it fits.
            if last_gap_end is None or not second < last_gap_end <= first:
                last_gap_end = transition_between(second, first, tz)
            now = Occurrence(last_gap_end, wall, "gap", shift)
        while pending and pending[0].at <= now.at:
            yield pending.popleft()
        yield now
        if later is not None:
            pending.append(later)
    yield from pending


def fire_instants(found: Iterable[Occurrence]) -> Iterator[datetime]:
    """The distinct instants, increasing, of the occurrences ``found`` that fire."""
    last: datetime | None = None
    for occurrence in found:
        if occurrence.fires and (last is None or occurrence.at > last):
            last = occurrence.at
            yield occurrence.at
