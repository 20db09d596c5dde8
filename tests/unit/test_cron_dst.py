"""Daylight saving: dated examples of every rule in five zones, then properties checked by
hypothesis against a brute-force reading of the rules (docs/cron.md).

The rules, by default:
- a fixed-hour expression fires at a wall time that does not exist (spring forward) once, at
  the first instant after the gap, and at a wall time that occurs twice (fall back) once, at
  its first occurrence;
- an expression whose hour field is ``*`` or a step fires whenever the clock shows a matching
  time: by real elapsed time, nothing in the gap, twice in the repeated hour.

Transitions used (UTC): Berlin 2026-03-29/2027-03-28 01:00 (02:00 CET -> 03:00 CEST),
2026-10-25/2027-10-31 01:00 (03:00 CEST -> 02:00 CET); New York 2026-03-08/2027-03-14 07:00
(02:00 EST -> 03:00 EDT), 2026-11-01/2027-11-07 06:00 (02:00 EDT -> 01:00 EST); Lord Howe
2026-04-04/2027-04-03 15:00 (02:00 +11 -> 01:30 +10:30), 2026-10-03/2027-10-02 15:30
(02:00 +10:30 -> 02:30 +11); Havana 2026-03-08 05:00 (00:00 CST -> 01:00 CDT).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import get_args
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.domain.cron import DstPolicy, fire_times, parse_expression, preview
from tickwheel.domain.cron_dst import Ambiguous, Nonexistent, gap_end, walk_start, wall_instants


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def fires(zone: str, expression: str, after: str | datetime, count: int) -> list[datetime]:
    start = at(after) if isinstance(after, str) else after
    return fire_times(parse_expression(expression), ZoneInfo(zone), start, count)


BERLIN, NEW_YORK, LORD_HOWE = "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"

# (zone, expression, after (UTC), expected fire times (UTC)); comments give local times.
EXAMPLES = [
    # --- Europe/Berlin, spring forward: 02:00-02:59 local does not exist -------------------
    # 02:30 does not exist on 03-29: once, at 03:00 CEST; the day after, 02:30 CEST again.
    (BERLIN, "30 2 * * *", "2026-03-28 12:00", ["2026-03-29 01:00", "2026-03-30 00:30"]),
    (BERLIN, "30 2 * * *", "2027-03-27 12:00", ["2027-03-28 01:00", "2027-03-29 00:30"]),
    # Every minute of the missing hour collapses into the one instant after the gap.
    (BERLIN, "* 2 * * *", "2026-03-28 12:00", ["2026-03-29 01:00", "2026-03-30 00:00"]),
    # 02:00 and 02:30 both shift to 03:00 (once), 03:30 is a normal time.
    (
        BERLIN,
        "0,30 2,3 * * *",
        "2026-03-28 12:00",
        ["2026-03-29 01:00", "2026-03-29 01:30", "2026-03-30 00:00"],
    ),
    # Hourly: 00:00 CET, 01:00 CET, 03:00 CEST, 04:00 CEST: every real hour, none twice.
    (
        BERLIN,
        "0 * * * *",
        "2026-03-28 22:30",
        ["2026-03-28 23:00", "2026-03-29 00:00", "2026-03-29 01:00", "2026-03-29 02:00"],
    ),
    (
        BERLIN,
        "*/15 * * * *",
        "2026-03-29 00:30",
        ["2026-03-29 00:45", "2026-03-29 01:00", "2026-03-29 01:15"],
    ),
    # A step in the hour field follows the clock: 02:00 never shows, so it does not fire.
    (
        BERLIN,
        "0 */2 * * *",
        "2026-03-28 22:30",
        ["2026-03-28 23:00", "2026-03-29 02:00", "2026-03-29 04:00"],
    ),
    # --- Europe/Berlin, fall back: 02:00-02:59 local happens twice --------------------------
    # 02:30 fires at its first occurrence (02:30 CEST = 00:30Z) only, not at 01:30Z.
    (BERLIN, "30 2 * * *", "2026-10-24 12:00", ["2026-10-25 00:30", "2026-10-26 01:30"]),
    (BERLIN, "30 2 * * *", "2027-10-30 12:00", ["2027-10-31 00:30", "2027-11-01 01:30"]),
    # A fixed hour with a stepped minute is still fixed-time: the first pass only.
    (
        BERLIN,
        "*/30 2 * * *",
        "2026-10-24 12:00",
        ["2026-10-25 00:00", "2026-10-25 00:30", "2026-10-26 01:00"],
    ),
    # Hourly fires at 02:00 CEST and at 02:00 CET: both 00:00Z and 01:00Z.
    (
        BERLIN,
        "0 * * * *",
        "2026-10-24 22:30",
        ["2026-10-24 23:00", "2026-10-25 00:00", "2026-10-25 01:00", "2026-10-25 02:00"],
    ),
    (
        BERLIN,
        "0 * * * *",
        "2027-10-30 22:30",
        ["2027-10-30 23:00", "2027-10-31 00:00", "2027-10-31 01:00", "2027-10-31 02:00"],
    ),
    (
        BERLIN,
        "0 */2 * * *",
        "2026-10-24 21:30",
        ["2026-10-24 22:00", "2026-10-25 00:00", "2026-10-25 01:00", "2026-10-25 03:00"],
    ),
    # --- America/New_York ---------------------------------------------------------------------
    (NEW_YORK, "30 2 * * *", "2026-03-07 12:00", ["2026-03-08 07:00", "2026-03-09 06:30"]),
    (NEW_YORK, "0 2 * * *", "2027-03-13 12:00", ["2027-03-14 07:00", "2027-03-15 06:00"]),
    (
        NEW_YORK,
        "0 * * * *",
        "2026-03-08 05:30",
        ["2026-03-08 06:00", "2026-03-08 07:00", "2026-03-08 08:00"],
    ),
    # 01:30 happens twice on 11-01: 01:30 EDT (05:30Z) only.
    (NEW_YORK, "30 1 * * *", "2026-11-01 00:00", ["2026-11-01 05:30", "2026-11-02 06:30"]),
    (NEW_YORK, "30 1 * * *", "2027-11-06 12:00", ["2027-11-07 05:30", "2027-11-08 06:30"]),
    (
        NEW_YORK,
        "0 * * * *",
        "2026-11-01 04:30",
        ["2026-11-01 05:00", "2026-11-01 06:00", "2026-11-01 07:00"],
    ),
    (
        NEW_YORK,
        "*/30 * * * *",
        "2027-11-07 05:10",
        ["2027-11-07 05:30", "2027-11-07 06:00", "2027-11-07 06:30", "2027-11-07 07:00"],
    ),
    # --- Australia/Lord_Howe: half-hour shifts ---------------------------------------------------
    # Fall back 2026-04-05 02:00 +11 -> 01:30 +10:30: 01:30-01:59 happens twice.
    (LORD_HOWE, "45 1 * * *", "2026-04-04 12:00", ["2026-04-04 14:45", "2026-04-05 15:15"]),
    (
        LORD_HOWE,
        "*/15 1 * * *",
        "2026-04-04 12:00",
        ["2026-04-04 14:00", "2026-04-04 14:15", "2026-04-04 14:30", "2026-04-04 14:45"],
    ),
    # 01:30 +11 (14:30Z) and 01:30 +10:30 (15:00Z) both show on the clock.
    (
        LORD_HOWE,
        "30 * * * *",
        "2026-04-04 13:00",
        ["2026-04-04 13:30", "2026-04-04 14:30", "2026-04-04 15:00", "2026-04-04 16:00"],
    ),
    (
        LORD_HOWE,
        "*/15 * * * *",
        "2027-04-03 14:40",
        ["2027-04-03 14:45", "2027-04-03 15:00", "2027-04-03 15:15", "2027-04-03 15:30"],
    ),
    # Spring forward 2026-10-04 02:00 +10:30 -> 02:30 +11: 02:00-02:29 does not exist.
    (LORD_HOWE, "15 2 * * *", "2026-10-03 12:00", ["2026-10-03 15:30", "2026-10-04 15:15"]),
    (LORD_HOWE, "0 2 * * *", "2027-10-02 12:00", ["2027-10-02 15:30", "2027-10-03 15:00"]),
    # 02:45 exists (+11) and is not moved.
    (LORD_HOWE, "45 2 * * *", "2026-10-03 12:00", ["2026-10-03 15:45", "2026-10-04 15:45"]),
    # Hourly: 00:00, 01:00 (+10:30), [02:00 never shows], 03:00 (+11).
    (
        LORD_HOWE,
        "0 * * * *",
        "2026-10-03 13:00",
        ["2026-10-03 13:30", "2026-10-03 14:30", "2026-10-03 16:00", "2026-10-03 17:00"],
    ),
    (
        LORD_HOWE,
        "30 * * * *",
        "2026-10-03 13:30",
        ["2026-10-03 14:00", "2026-10-03 15:00", "2026-10-03 15:30", "2026-10-03 16:30"],
    ),
    # --- no daylight saving -------------------------------------------------------------------
    ("Asia/Tokyo", "30 2 * * *", "2026-03-28 00:00", ["2026-03-28 17:30", "2026-03-29 17:30"]),
    ("Asia/Tokyo", "30 2 * * *", "2026-10-24 00:00", ["2026-10-24 17:30", "2026-10-25 17:30"]),
    (
        "Asia/Tokyo",
        "0 * * * *",
        "2026-10-24 23:30",
        ["2026-10-25 00:00", "2026-10-25 01:00", "2026-10-25 02:00"],
    ),
    ("UTC", "30 2 * * *", "2026-03-28 12:00", ["2026-03-29 02:30", "2026-03-30 02:30"]),
    ("UTC", "30 2 * * *", "2027-10-30 12:00", ["2027-10-31 02:30", "2027-11-01 02:30"]),
    ("UTC", "0 * * * *", "2026-10-25 00:30", ["2026-10-25 01:00", "2026-10-25 02:00"]),
    # --- macros get the same rules -----------------------------------------------------------
    (BERLIN, "@daily", "2026-03-28 12:00", ["2026-03-28 23:00", "2026-03-29 22:00"]),
    (BERLIN, "@hourly", "2026-10-25 00:30", ["2026-10-25 01:00", "2026-10-25 02:00"]),
    # Havana springs forward at midnight: 00:00 does not exist, so midnight is 01:00 CDT.
    ("America/Havana", "@midnight", "2026-03-07 12:00", ["2026-03-08 05:00", "2026-03-09 04:00"]),
    ("America/Havana", "@weekly", "2026-03-07 12:00", ["2026-03-08 05:00", "2026-03-15 04:00"]),
    # --- six fields get the same rules ------------------------------------------------------
    (BERLIN, "0 30 2 * * *", "2026-03-28 12:00", ["2026-03-29 01:00", "2026-03-30 00:30"]),
    (BERLIN, "0 30 2 * * *", "2026-10-24 12:00", ["2026-10-25 00:30", "2026-10-26 01:30"]),
    # Two missing seconds collapse into one fire at the end of the gap.
    (BERLIN, "15,45 30 2 * * *", "2026-03-28 12:00", ["2026-03-29 01:00", "2026-03-30 00:30:15"]),
    (
        BERLIN,
        "15,45 30 2 * * *",
        "2026-10-24 12:00",
        ["2026-10-25 00:30:15", "2026-10-25 00:30:45", "2026-10-26 01:30:15"],
    ),
    (
        BERLIN,
        "*/20 * * * * *",
        "2026-10-25 00:59:30",
        ["2026-10-25 00:59:40", "2026-10-25 01:00:00", "2026-10-25 01:00:20"],
    ),
    (LORD_HOWE, "0 15 2 * * *", "2026-10-03 12:00", ["2026-10-03 15:30", "2026-10-04 15:15"]),
]


@pytest.mark.parametrize(("zone", "expression", "after", "expected"), EXAMPLES)
def test_dated_examples(zone: str, expression: str, after: str, expected: list[str]) -> None:
    assert fires(zone, expression, after, len(expected)) == [at(e) for e in expected]


# --- starting inside a transition -------------------------------------------------------------


def test_after_the_gap_end_itself_is_strictly_after() -> None:
    assert fires(BERLIN, "30 2 * * *", "2026-03-29 00:59:59.999999", 1) == [at("2026-03-29 01:00")]
    assert fires(BERLIN, "30 2 * * *", "2026-03-29 01:00", 1) == [at("2026-03-30 00:30")]


def test_after_given_as_a_nonexistent_local_time_is_read_by_its_fold() -> None:
    # PEP 495: 02:15 with fold=0 reads with the offset before the gap (+1: 01:15Z, which is
    # 03:15 CEST), with fold=1 with the offset after it (+2: 00:15Z, 01:15 CET).
    berlin = ZoneInfo(BERLIN)
    fold0 = datetime(2026, 3, 29, 2, 15, tzinfo=berlin)
    fold1 = datetime(2026, 3, 29, 2, 15, tzinfo=berlin, fold=1)
    assert fires(BERLIN, "30 2 * * *", fold0, 1) == [at("2026-03-30 00:30")]
    assert fires(BERLIN, "30 2 * * *", fold1, 1) == [at("2026-03-29 01:00")]
    assert fires(BERLIN, "0 * * * *", fold0, 1) == [at("2026-03-29 02:00")]


def test_after_in_the_first_pass_of_the_repeated_hour() -> None:
    # 00:30Z is 02:30 CEST. 02:10 is behind it on the clock, yet 02:10 CET (01:10Z) is ahead.
    assert fires(BERLIN, "10 * * * *", "2026-10-25 00:30", 2) == [
        at("2026-10-25 01:10"),
        at("2026-10-25 02:10"),
    ]
    assert fires(BERLIN, "*/20 * * * *", "2026-10-25 00:30", 5) == [
        at("2026-10-25 00:40"),
        at("2026-10-25 01:00"),
        at("2026-10-25 01:20"),
        at("2026-10-25 01:40"),
        at("2026-10-25 02:00"),
    ]
    # A fixed time whose first occurrence is past does not come back in the second pass.
    assert fires(BERLIN, "10 2 * * *", "2026-10-25 00:30", 1) == [at("2026-10-26 01:10")]
    assert fires(BERLIN, "40 2 * * *", "2026-10-25 00:30", 1) == [at("2026-10-25 00:40")]


def test_after_in_the_second_pass_of_the_repeated_hour() -> None:
    # 01:15Z is 02:15 CET: the 02:30 of today fired at 00:30Z already, before `after`.
    assert fires(BERLIN, "30 2 * * *", "2026-10-25 01:15", 1) == [at("2026-10-26 01:30")]
    assert fires(BERLIN, "0 * * * *", "2026-10-25 01:15", 1) == [at("2026-10-25 02:00")]
    assert fires(BERLIN, "30 * * * *", "2026-10-25 01:15", 1) == [at("2026-10-25 01:30")]
    assert fires(LORD_HOWE, "45 * * * *", "2026-04-04 15:05", 2) == [
        at("2026-04-04 15:15"),  # 01:45 +10:30, the second pass
        at("2026-04-04 16:15"),
    ]


def test_the_helpers_find_the_gap_end_and_the_start_of_the_repeat() -> None:
    berlin, lord_howe = ZoneInfo(BERLIN), ZoneInfo(LORD_HOWE)
    assert gap_end(datetime(2026, 3, 29, 2, 30), berlin) == at("2026-03-29 01:00")
    assert gap_end(datetime(2026, 10, 4, 2, 1), lord_howe) == at("2026-10-03 15:30")
    first, second = wall_instants(datetime(2026, 10, 25, 2, 30), berlin)
    assert (first, second) == (at("2026-10-25 00:30"), at("2026-10-25 01:30"))
    assert walk_start(at("2026-10-25 00:30"), berlin) == datetime(2026, 10, 25, 1, 30)
    assert walk_start(at("2026-10-25 01:30"), berlin) == datetime(2026, 10, 25, 2, 30)
    assert walk_start(at("2026-06-01 12:00"), berlin) == datetime(2026, 6, 1, 14, 0)


# --- the same rules for five and six fields, and for classic cron's cases ---------------------

TRANSITION_DAYS = [
    (BERLIN, "2026-03-28 12:00"),
    (BERLIN, "2026-10-24 12:00"),
    (BERLIN, "2027-03-27 12:00"),
    (BERLIN, "2027-10-30 12:00"),
    (NEW_YORK, "2026-03-07 18:00"),
    (NEW_YORK, "2026-10-31 18:00"),
    (LORD_HOWE, "2026-04-04 00:00"),
    (LORD_HOWE, "2026-10-03 00:00"),
]
FIVE_FIELD = [
    "30 2 * * *",
    "0 1 * * *",
    "*/15 2 * * *",
    "0 * * * *",
    "*/10 * * * *",
    "45 */2 * * *",
]


@pytest.mark.parametrize(("zone", "after"), TRANSITION_DAYS)
@pytest.mark.parametrize("expression", FIVE_FIELD)
def test_six_fields_follow_the_same_rules_as_five(zone: str, after: str, expression: str) -> None:
    assert fires(zone, f"0 {expression}", after, 40) == fires(zone, expression, after, 40)


@pytest.mark.parametrize(("zone", "after"), TRANSITION_DAYS[:6])
@pytest.mark.parametrize("expression", ["30 2 * * *", "0 1 * * *", "15 1,2,3 * * *", "0 */2 * * *"])
def test_agrees_with_cronsim_where_its_classic_rules_apply(
    zone: str, after: str, expression: str
) -> None:
    # cronsim (5 fields, started outside a transition, whole-hour zone) implements classic
    # cron's rules directly: fixed times shift/fire once, hour steps follow the clock.
    tz = ZoneInfo(zone)
    it = CronSim(expression, at(after).astimezone(tz))
    theirs = [next(it).astimezone(UTC) for _ in range(30)]
    assert fires(zone, expression, after, 30) == theirs


# --- properties, checked against a brute-force reading of the rules --------------------------

EUROPE = ("2026-03-29 01:00", "2026-10-25 01:00", "2027-03-28 01:00", "2027-10-31 01:00")
TRANSITIONS = {
    BERLIN: EUROPE,
    "Europe/Dublin": EUROPE,  # "negative" DST: winter time is the one marked as daylight saving
    NEW_YORK: ("2026-03-08 07:00", "2026-11-01 06:00", "2027-03-14 07:00", "2027-11-07 06:00"),
    LORD_HOWE: ("2026-04-04 15:00", "2026-10-03 15:30", "2027-04-03 15:00", "2027-10-02 15:30"),
    "America/Havana": ("2026-03-08 05:00", "2026-11-01 05:00"),  # at local midnight
    "Asia/Tokyo": EUROPE,
    "UTC": EUROPE,
}
ZONE_AND_TRANSITION = [(zone, at(text)) for zone, texts in TRANSITIONS.items() for text in texts]


@dataclass(frozen=True)
class Case:
    """An expression built from explicit sets, so the test can match wall times itself."""

    seconds: frozenset[int] | None  # None: the 5-field form
    minutes: frozenset[int]
    hours: frozenset[int]
    hour_text: str
    weekdays: frozenset[int] | None  # cron numbering, Sunday = 0; None: "*"
    zone: str
    after: datetime

    @property
    def expression(self) -> str:
        minute = ",".join(map(str, sorted(self.minutes)))
        weekday = "*" if self.weekdays is None else ",".join(map(str, sorted(self.weekdays)))
        five = f"{minute} {self.hour_text} * * {weekday}"
        return (
            five if self.seconds is None else f"{','.join(map(str, sorted(self.seconds)))} {five}"
        )

    @property
    def elapsed(self) -> bool:
        return self.hour_text.startswith("*")

    def matches(self, wall: datetime) -> bool:
        return (
            wall.second in (self.seconds or {0})
            and wall.minute in self.minutes
            and wall.hour in self.hours
            and (self.weekdays is None or (wall.weekday() + 1) % 7 in self.weekdays)
        )


@st.composite
def cases(draw: st.DrawFn) -> Case:
    seconds = draw(st.none() | st.frozensets(st.integers(0, 59), min_size=1, max_size=3))
    minutes = draw(
        st.frozensets(st.sampled_from([0, 1, 10, 15, 29, 30, 31, 45, 59]), min_size=1, max_size=4)
        | st.frozensets(st.integers(0, 59), min_size=1, max_size=3)
    )
    step = draw(st.sampled_from([None, 1, 2, 3, 5]))
    if step is None:
        # Mostly the hours in which the transitions happen (local 00:00-03:00).
        hour = st.integers(0, 3) | st.integers(0, 3) | st.integers(0, 23)
        hours = draw(st.frozensets(hour, min_size=1, max_size=3))
        hour_text = ",".join(map(str, sorted(hours)))
    else:
        hours, hour_text = frozenset(range(0, 24, step)), ("*" if step == 1 else f"*/{step}")
    weekdays = draw(st.none() | st.frozensets(st.integers(0, 6), min_size=2, max_size=6))
    zone, anchor = draw(st.sampled_from(ZONE_AND_TRANSITION))
    shift = draw(st.integers(-30 * 3600, 3 * 3600))
    micro = draw(st.sampled_from([0, 0, 1, 999_999]))
    after = anchor + timedelta(seconds=shift, microseconds=micro)
    return Case(seconds, minutes, hours, hour_text, weekdays, zone, after)


def oracle(case: Case, end: datetime) -> list[datetime]:
    """Every fire instant in (after, end], found by walking real time minute by minute.

    Elapsed-time: every instant whose wall time matches. Fixed-time: every instant whose wall
    time matches and is that wall time's first occurrence, plus each transition instant that
    ends a gap in which some wall time matches. Transitions here are on whole minutes."""
    tz, found = ZoneInfo(case.zone), set()
    seconds, elapsed = sorted(case.seconds or {0}), case.elapsed
    minute = case.after.replace(second=0, microsecond=0)
    earlier = (minute - timedelta(minutes=1)).astimezone(tz).replace(tzinfo=None)
    while minute <= end:  # ~2,400 minutes per case: only matching wall times are converted back
        wall = minute.astimezone(tz).replace(tzinfo=None)
        if not elapsed and wall > earlier + timedelta(minutes=1):
            gap = (
                earlier + timedelta(minutes=1, seconds=s)
                for s in range(int((wall - earlier).total_seconds()) - 60)
            )
            if any(case.matches(w) for w in gap):
                found.add(minute)
        for second in seconds:
            local = wall + timedelta(seconds=second)
            if not case.matches(local):
                continue
            instant = minute + timedelta(seconds=second)
            if elapsed or local.replace(tzinfo=tz, fold=0).astimezone(UTC) == instant:
                found.add(instant)
        earlier = wall  # the wall time of the minute before the next one
        minute += timedelta(minutes=1)
    return sorted(t for t in found if case.after < t <= end)


@settings(max_examples=250, deadline=None)
@given(cases())
def test_matches_the_brute_force_reading_of_the_rules(case: Case) -> None:
    end = case.after + timedelta(hours=40)
    expected = oracle(case, end)
    ours = fire_times(
        parse_expression(case.expression), ZoneInfo(case.zone), case.after, len(expected) + 1
    )
    assert ours[: len(expected)] == expected
    assert len(ours) == len(expected) + 1 and ours[-1] > end


def check_sequence(case: Case, result: list[datetime]) -> None:
    tz = ZoneInfo(case.zone)
    assert all(r.tzinfo is UTC for r in result)
    assert all(r > case.after for r in result)
    assert all(a < b for a, b in pairwise(result))
    for r in result:
        wall = r.astimezone(tz).replace(tzinfo=None)
        if not case.matches(wall):
            # Only a fixed time moved out of a gap, landing exactly on the gap's end.
            assert not case.elapsed
            before = (r - timedelta(seconds=1)).astimezone(tz).utcoffset()
            now = r.astimezone(tz).utcoffset()
            assert before is not None and now is not None and before < now


def min_spacing(case: Case) -> timedelta:
    """The shortest distance between two matching wall times, days apart or not."""
    day = sorted(
        h * 3600 + m * 60 + s
        for h in case.hours
        for m in case.minutes
        for s in (case.seconds or {0})
    )
    gaps = [b - a for a, b in pairwise(day)] + [day[0] + 86400 - day[-1]]
    return timedelta(seconds=min(gaps))


SHIFT = {BERLIN: 3600, NEW_YORK: 3600, LORD_HOWE: 1800, "Asia/Tokyo": 0, "UTC": 0}
SHIFT |= {"America/Havana": 3600, "Europe/Dublin": 3600}


@settings(max_examples=300, deadline=None)
@given(cases(), st.integers(1, 40))
def test_sequence_properties(case: Case, count: int) -> None:
    expr, tz = parse_expression(case.expression), ZoneInfo(case.zone)
    result = fire_times(expr, tz, case.after, count)
    assert len(result) == count
    check_sequence(case, result)
    if not case.elapsed:
        # A fixed time never fires twice: wall times only go forward, and real spacing shrinks
        # below the expression's own spacing by no more than the zone's DST shift.
        walls = [r.astimezone(tz).replace(tzinfo=None) for r in result]
        assert all(a < b for a, b in pairwise(walls))
        floor = min_spacing(case) - timedelta(seconds=SHIFT[case.zone])
        assert all(b - a >= floor for a, b in pairwise(result))


@settings(max_examples=150, deadline=None)
@given(cases())
def test_continuing_from_any_result_gives_the_rest_of_the_sequence(case: Case) -> None:
    expr, tz = parse_expression(case.expression), ZoneInfo(case.zone)
    result = fire_times(expr, tz, case.after, 12)
    for i, r in enumerate(result):
        assert fire_times(expr, tz, r, len(result) - i - 1) == result[i + 1 :]


# --- a fixed hour with a stepped minute (docs/cron.md, "A fixed hour, a stepped minute") ------
# Vixie cron and cronie call `*/15 2 * * *` a "wildcard" job (its minute starts with `*`): no
# run at all on the day 02:xx is skipped, every 02:xx twice on the day it repeats. Ours is a
# fixed-hour job whatever the minute's spelling, as the table in docs/cron.md shows.

QUARTERS = ["00", "15", "30", "45"]


@pytest.mark.parametrize(
    ("policy", "spring", "autumn"),
    [
        (DstPolicy(), ["01:00"], ["00:00", "00:15", "00:30", "00:45"]),
        (DstPolicy("skip"), [], ["00:00", "00:15", "00:30", "00:45"]),
        (DstPolicy(ambiguous="second"), ["01:00"], ["01:00", "01:15", "01:30", "01:45"]),
        (
            DstPolicy("skip", "both"),
            [],
            [f"0{h}:{m}" for h in (0, 1) for m in QUARTERS],
        ),
    ],
)
def test_a_stepped_minute_in_a_fixed_hour_on_both_transition_days_in_berlin(
    policy: DstPolicy, spring: list[str], autumn: list[str]
) -> None:
    expr, tz = parse_expression("*/15 2 * * *"), ZoneInfo(BERLIN)
    for day, expected in (("2026-03-29", spring), ("2026-10-25", autumn)):
        start = at(f"{day} 00:00") - timedelta(hours=3)
        found = fire_times(expr, tz, start, 12, policy)
        on_the_day = [t for t in found if t < at(f"{day} 12:00")]
        assert on_the_day == [at(f"{day} {hm}") for hm in expected], (day, policy)
    # The preview says what became of the four missing quarters on 29 March.
    row = preview("*/15 2 * * *", BERLIN, at("2026-03-28 22:00"), 1)[0]
    assert (row.dst, row.fires, row.at) == ("shifted", True, at("2026-03-29 01:00"))
    assert row.reason is not None and "02:00 to 02:45 (4 times)" in row.reason


@st.composite
def stepped_minutes(draw: st.DrawFn) -> tuple[str, str]:
    """A minute field spelt with a step (``*/15``, ``5-50/10``, ``7/20``) and the same minutes
    listed one by one."""
    step = draw(st.integers(1, 30))
    first = draw(st.integers(0, step - 1) | st.integers(0, 58))
    last = draw(st.integers(first + 1, 59))  # (cronsim 2.8 reads a range a-a/n as a/n)
    text = draw(
        st.sampled_from(
            [f"{first}-{last}/{step}", f"{first}/{step}"]
            + ([f"*/{step}"] if first == 0 and last == 59 else [])
        )
    )
    stop = 59 if text.startswith(("*", f"{first}/")) else last
    return text, ",".join(str(m) for m in range(first, stop + 1, step))


@settings(max_examples=200, deadline=None)
@given(
    stepped_minutes(),
    st.sampled_from(["1", "2", "3", "1,2", "2-3", "0,2,4"]),
    st.sampled_from(ZONE_AND_TRANSITION),
    st.integers(-6 * 3600, 3600),
    st.sampled_from(get_args(Nonexistent)),
    st.sampled_from(get_args(Ambiguous)),
)
def test_a_minute_step_never_changes_what_a_fixed_hour_does_at_a_transition(
    minute: tuple[str, str],
    hours: str,
    zone_and_transition: tuple[str, datetime],
    shift: int,
    nonexistent: Nonexistent,
    ambiguous: Ambiguous,
) -> None:
    # Unlike Vixie cron's rule (a minute starting with `*` makes a "wildcard" job), only the
    # hour field decides: a stepped minute fires exactly as its minutes listed one by one, and
    # a fixed time is never fired twice unless the policy says both.
    stepped, listed = minute
    zone, transition = zone_and_transition
    tz, after, policy = (
        ZoneInfo(zone),
        transition + timedelta(seconds=shift),
        DstPolicy(nonexistent, ambiguous),
    )
    ours = fire_times(parse_expression(f"{stepped} {hours} * * *"), tz, after, 30, policy)
    assert not parse_expression(f"{stepped} {hours} * * *").follows_elapsed_time
    assert ours == fire_times(parse_expression(f"{listed} {hours} * * *"), tz, after, 30, policy)
    if ambiguous != "both":
        walls = [t.astimezone(tz).replace(tzinfo=None) for t in ours]
        assert len(set(walls)) == len(walls)
