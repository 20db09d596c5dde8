"""The per-job ``dstPolicy``, the string entry point ``next_fire_times`` and the explained
``preview`` (docs/cron.md). Daylight saving with the default policy is in test_cron_dst.py.

Transitions used (UTC): Berlin 2026-03-29 01:00 (02:00 CET -> 03:00 CEST) and 2026-10-25 01:00
(03:00 CEST -> 02:00 CET); New York 2026-03-08 07:00 (02:00 EST -> 03:00 EDT) and 2026-11-01
06:00 (02:00 EDT -> 01:00 EST); Lord Howe 2026-04-04 15:00 (02:00 +11 -> 01:30 +10:30) and
2026-10-03 15:30 (02:00 +10:30 -> 02:30 +11).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise, product
from typing import get_args
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.domain.cron import (
    DEFAULT_DST_POLICY,
    DstPolicy,
    fire_previews,
    fire_times,
    next_fire_times,
    parse_expression,
    preview,
)
from tickwheel.domain.cron_dst import Ambiguous, Nonexistent
from tickwheel.domain.errors import InvalidInput

BERLIN, NEW_YORK, LORD_HOWE = "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"
POLICIES = [DstPolicy(n, a) for n, a in product(get_args(Nonexistent), get_args(Ambiguous))]


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def ats(*texts: str) -> list[datetime]:
    return [at(text) for text in texts]


# --- DstPolicy --------------------------------------------------------------------------------


def test_the_default_policy_is_shift_forward_and_first() -> None:
    assert DEFAULT_DST_POLICY == DstPolicy() == DstPolicy("shift_forward", "first")
    assert DstPolicy().to_document() == {"nonexistent": "shift_forward", "ambiguous": "first"}


@pytest.mark.parametrize("policy", POLICIES)
def test_a_policy_survives_its_document(policy: DstPolicy) -> None:
    assert DstPolicy.from_document(policy.to_document()) == policy


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (None, DstPolicy()),
        ({}, DstPolicy()),
        ({"nonexistent": "skip"}, DstPolicy("skip", "first")),
        ({"ambiguous": "both"}, DstPolicy("shift_forward", "both")),
        ({"nonexistent": None, "ambiguous": "second"}, DstPolicy("shift_forward", "second")),
    ],
)
def test_missing_or_null_means_the_default(document: object, expected: DstPolicy) -> None:
    assert DstPolicy.from_document(document) == expected


def policy_errors(document: object, path: str = "dstPolicy") -> list[tuple[str, str]]:
    with pytest.raises(InvalidInput) as caught:
        DstPolicy.from_document(document, path)
    return [(error.path, error.message) for error in caught.value.errors]


def test_bad_policy_documents_say_where_and_what() -> None:
    assert policy_errors({"nonexistent": "later"}) == [
        ("dstPolicy.nonexistent", "must be 'shift_forward' or 'skip', got 'later'")
    ]
    assert policy_errors({"ambiguous": "FIRST", "nonexistent": 1}) == [
        ("dstPolicy.nonexistent", "must be 'shift_forward' or 'skip', got 1"),
        ("dstPolicy.ambiguous", "must be 'first' or 'second' or 'both', got 'FIRST'"),
    ]
    assert policy_errors({"ambigous": "both"}) == [
        ("dstPolicy.ambigous", "unknown field; the fields are nonexistent and ambiguous")
    ]
    assert policy_errors("skip") == [
        ("dstPolicy", 'must be an object such as {"nonexistent": "skip", "ambiguous": "both"}')
    ]
    assert policy_errors({"ambiguous": "last"}, "cronJobs[2].dstPolicy") == [
        ("cronJobs[2].dstPolicy.ambiguous", "must be 'first' or 'second' or 'both', got 'last'")
    ]


def test_the_message_names_the_first_problem_and_construction_checks_too() -> None:
    with pytest.raises(InvalidInput) as caught:
        DstPolicy.from_document({"nonexistent": "x"})
    assert caught.value.message == (
        "invalid dstPolicy: dstPolicy.nonexistent: must be 'shift_forward' or 'skip', got 'x'"
    )
    with pytest.raises(InvalidInput) as caught:
        DstPolicy(ambiguous="last")  # type: ignore[arg-type]
    assert [e.path for e in caught.value.errors] == ["dstPolicy.ambiguous"]


# --- the policies, dated ------------------------------------------------------------------------

# (zone, expression, after, expected by nonexistent or by ambiguous); two fires each.
SPRING = [
    # 02:30 does not exist: 03:00 CEST, or nothing that day.
    (BERLIN, "30 2 * * *", "2026-03-28 12:00", "2026-03-29 01:00", ["2026-03-30 00:30"]),
    (NEW_YORK, "30 2 * * *", "2026-03-07 12:00", "2026-03-08 07:00", ["2026-03-09 06:30"]),
    # 02:15 does not exist (02:00 +10:30 -> 02:30 +11): 02:30 +11, or nothing.
    (LORD_HOWE, "15 2 * * *", "2026-10-03 12:00", "2026-10-03 15:30", ["2026-10-04 15:15"]),
]
FALL = [
    # (zone, expression, after, first occurrence, second occurrence, the day after)
    (
        BERLIN,
        "30 2 * * *",
        "2026-10-24 12:00",
        "2026-10-25 00:30",
        "2026-10-25 01:30",
        "2026-10-26 01:30",
    ),
    (
        NEW_YORK,
        "30 1 * * *",
        "2026-10-31 12:00",
        "2026-11-01 05:30",
        "2026-11-01 06:30",
        "2026-11-02 06:30",
    ),
    # 01:45 +11 and 01:45 +10:30.
    (
        LORD_HOWE,
        "45 1 * * *",
        "2026-04-04 12:00",
        "2026-04-04 14:45",
        "2026-04-04 15:15",
        "2026-04-05 15:15",
    ),
]


@pytest.mark.parametrize("policy", POLICIES, ids=str)
@pytest.mark.parametrize(("zone", "expression", "after", "shifted", "later"), SPRING)
def test_a_nonexistent_time_shifts_forward_or_is_skipped(
    policy: DstPolicy, zone: str, expression: str, after: str, shifted: str, later: list[str]
) -> None:
    day_after = at(later[0])
    expected = (
        [at(shifted), day_after]
        if policy.nonexistent == "shift_forward"
        else [day_after, day_after + timedelta(days=1)]
    )
    assert next_fire_times(expression, zone, at(after), 2, policy) == expected


@pytest.mark.parametrize("policy", POLICIES, ids=str)
@pytest.mark.parametrize(("zone", "expression", "after", "first", "second", "next_day"), FALL)
def test_a_repeated_time_fires_at_the_first_the_second_or_both(
    policy: DstPolicy,
    zone: str,
    expression: str,
    after: str,
    first: str,
    second: str,
    next_day: str,
) -> None:
    expected = {
        "first": ats(first, next_day),
        "second": ats(second, next_day),
        "both": ats(first, second),
    }[policy.ambiguous]
    assert next_fire_times(expression, zone, at(after), 2, policy) == expected


@pytest.mark.parametrize("policy", POLICIES, ids=str)
def test_both_rules_in_one_year(policy: DstPolicy) -> None:
    # 25 and 29 March and October 2026 at 02:30 in Berlin: a gap on 03-29, a repeat on 10-25.
    spring = ats("2026-03-29 01:00") if policy.nonexistent == "shift_forward" else []
    fall = {
        "first": ats("2026-10-25 00:30"),
        "second": ats("2026-10-25 01:30"),
        "both": ats("2026-10-25 00:30", "2026-10-25 01:30"),
    }[policy.ambiguous]
    expected = [at("2026-03-25 01:30"), *spring, *fall, at("2026-10-29 01:30")]
    result = next_fire_times(
        "30 2 25,29 3,10 *", BERLIN, at("2026-03-01 00:00"), len(expected), policy
    )
    assert result == expected


@pytest.mark.parametrize(
    ("policy", "expression", "after", "expected"),
    [
        # Every wall time of a fixed hour follows the policy: all of 02:xx skipped, or doubled.
        (DstPolicy("skip"), "*/30 2 * * *", "2026-03-28 12:00", ["2026-03-30 00:00"]),
        (DstPolicy("skip"), "15,45 30 2 * * *", "2026-03-28 12:00", ["2026-03-30 00:30:15"]),
        # 03:00 and 03:30 exist: they fire, only 02:00 and 02:30 are skipped.
        (
            DstPolicy("skip"),
            "0,30 2,3 * * *",
            "2026-03-28 12:00",
            ["2026-03-29 01:00", "2026-03-29 01:30", "2026-03-30 00:00"],
        ),
        (
            DstPolicy(ambiguous="both"),
            "*/30 2 * * *",
            "2026-10-24 12:00",
            ["2026-10-25 00:00", "2026-10-25 00:30", "2026-10-25 01:00", "2026-10-25 01:30"],
        ),
        (
            DstPolicy(ambiguous="second"),
            "*/30 2 * * *",
            "2026-10-24 12:00",
            ["2026-10-25 01:00", "2026-10-25 01:30", "2026-10-26 01:00"],
        ),
        (
            DstPolicy(ambiguous="second"),
            "0 30 2 * * *",
            "2026-10-24 12:00",
            ["2026-10-25 01:30", "2026-10-26 01:30"],
        ),
        # Macros are fixed-hour expressions: Havana's midnight does not exist on 03-08.
        (DstPolicy("skip"), "@daily", "2026-03-07 12:00", ["2026-03-09 04:00"]),
    ],
)
def test_more_policy_examples(
    policy: DstPolicy, expression: str, after: str, expected: list[str]
) -> None:
    zone = "America/Havana" if expression == "@daily" else BERLIN
    assert next_fire_times(expression, zone, at(after), len(expected), policy) == ats(*expected)


@pytest.mark.parametrize("policy", POLICIES, ids=str)
@pytest.mark.parametrize("expression", ["0 * * * *", "*/20 * * * *", "0 */2 * * *", "@hourly"])
@pytest.mark.parametrize(
    ("zone", "after"),
    [(BERLIN, "2026-03-28 20:00"), (BERLIN, "2026-10-24 20:00"), (LORD_HOWE, "2026-04-04 08:00")],
)
def test_elapsed_time_expressions_ignore_the_policy(
    policy: DstPolicy, expression: str, zone: str, after: str
) -> None:
    default = next_fire_times(expression, zone, at(after), 30)
    assert next_fire_times(expression, zone, at(after), 30, policy) == default


@pytest.mark.parametrize(
    ("after", "ambiguous", "expected"),
    [
        # 00:45Z is 02:45 CEST, the first pass: 02:30 CEST is past, 02:30 CET to come.
        ("2026-10-25 00:45", "first", "2026-10-26 01:30"),
        ("2026-10-25 00:45", "second", "2026-10-25 01:30"),
        ("2026-10-25 00:45", "both", "2026-10-25 01:30"),
        # 01:15Z is 02:15 CET, the second pass.
        ("2026-10-25 01:15", "first", "2026-10-26 01:30"),
        ("2026-10-25 01:15", "second", "2026-10-25 01:30"),
        ("2026-10-25 01:30", "both", "2026-10-26 01:30"),
    ],
)
def test_after_inside_the_repeated_hour(after: str, ambiguous: Ambiguous, expected: str) -> None:
    policy = DstPolicy(ambiguous=ambiguous)
    assert next_fire_times("30 2 * * *", BERLIN, at(after), 1, policy) == [at(expected)]


# --- the string entry point -------------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES, ids=str)
@pytest.mark.parametrize(
    ("zone", "expression", "after"),
    [(zone, expression, after) for zone, expression, after, *_ in SPRING + FALL],
)
def test_the_string_and_the_parsed_forms_agree(
    policy: DstPolicy, zone: str, expression: str, after: str
) -> None:
    parsed = fire_times(parse_expression(expression), ZoneInfo(zone), at(after), 10, policy)
    assert next_fire_times(expression, zone, at(after), 10, policy) == parsed
    rows = preview(expression, zone, at(after), 10, policy)
    assert rows == fire_previews(
        parse_expression(expression), ZoneInfo(zone), at(after), 10, policy
    )
    assert [row.at for row in rows if row.fires] == parsed


@pytest.mark.parametrize("call", [next_fire_times, preview])
def test_every_bad_argument_is_reported_at_once(call: object) -> None:
    assert callable(call)
    with pytest.raises(InvalidInput) as caught:
        call("0 25 * * *", "Europe/Berln", datetime(2026, 1, 1), -1)
    assert [error.path for error in caught.value.errors] == [
        "expression",
        "timezone",
        "after",
        "count",
    ]
    message = caught.value.message
    assert message.startswith(
        "invalid cron expression '0 25 * * *': field 2 (hour): 25 is out of range 0-23; "
        "unknown timezone 'Europe/Berln'; did you mean 'Europe/Berlin'"
    )
    assert message.endswith("; after must include a timezone or UTC offset; count must be >= 0")


def test_one_bad_argument_keeps_its_own_message() -> None:
    with pytest.raises(InvalidInput) as caught:
        next_fire_times("@reboot", "UTC", at("2026-01-01 00:00"), 1)
    assert caught.value.message == (
        "invalid cron expression '@reboot': unknown macro @reboot; use one of @yearly, "
        "@annually, @monthly, @weekly, @daily, @midnight, @hourly"
    )
    assert [error.path for error in caught.value.errors] == ["expression"]


# --- the policies, against a brute-force walk through real time -------------------------------

WALK_FROM = [
    (BERLIN, at("2026-03-29 01:00")),
    (BERLIN, at("2026-10-25 01:00")),
    (NEW_YORK, at("2026-03-08 07:00")),
    (NEW_YORK, at("2026-11-01 06:00")),
    (LORD_HOWE, at("2026-04-04 15:00")),
    (LORD_HOWE, at("2026-10-03 15:30")),
    ("America/Havana", at("2026-03-08 05:00")),
]


def walk(
    minutes: set[int],
    hours: set[int],
    elapsed: bool,
    zone: str,
    after: datetime,
    end: datetime,
    policy: DstPolicy,
) -> list[datetime]:
    """Every fire instant in (after, end], minute by minute through real time, read straight
    from the rules (transitions here fall on whole minutes)."""
    tz, found, minute = ZoneInfo(zone), set(), after.replace(second=0, microsecond=0)

    def matches(wall: datetime) -> bool:
        return wall.minute in minutes and wall.hour in hours

    before = (minute - timedelta(minutes=1)).astimezone(tz).replace(tzinfo=None)
    while minute <= end:  # ~1,800 minutes per example: only matching wall times are read back
        wall = minute.astimezone(tz).replace(tzinfo=None)
        skipped = int((wall - before).total_seconds()) // 60 - 1
        gap = [before + timedelta(minutes=k) for k in range(1, skipped + 1)]
        if not elapsed and policy.nonexistent == "shift_forward" and any(map(matches, gap)):
            found.add(minute)
        if matches(wall):
            first, second = (wall.replace(tzinfo=tz, fold=f).astimezone(UTC) for f in (0, 1))
            once = first == second or elapsed or policy.ambiguous == "both"
            chosen = first if policy.ambiguous == "first" else second
            if once or minute == chosen:
                found.add(minute)
        before = wall  # the wall time of the minute before the next one
        minute += timedelta(minutes=1)
    return sorted(t for t in found if after < t <= end)


@settings(max_examples=200, deadline=None)
@given(
    st.frozensets(st.sampled_from([0, 1, 15, 29, 30, 31, 45, 59]), min_size=1, max_size=3),
    st.frozensets(st.integers(0, 3) | st.integers(0, 23), min_size=1, max_size=3),
    st.sampled_from([None, 1, 2]),
    st.sampled_from(WALK_FROM),
    st.integers(-26 * 3600, 2 * 3600),
    st.sampled_from(POLICIES),
)
def test_matches_a_walk_through_real_time(
    minutes: frozenset[int],
    hours: frozenset[int],
    step: int | None,
    zone_and_transition: tuple[str, datetime],
    shift: int,
    policy: DstPolicy,
) -> None:
    zone, transition = zone_and_transition
    after = transition + timedelta(seconds=shift)
    hour_text = ",".join(map(str, sorted(hours))) if step is None else f"*/{step}"
    hour_set = set(hours) if step is None else set(range(0, 24, step))
    expression = f"{','.join(map(str, sorted(minutes)))} {hour_text} * * *"
    end = after + timedelta(hours=30)
    expected = walk(set(minutes), hour_set, step is not None, zone, after, end, policy)
    result = next_fire_times(expression, zone, at_utc(after), len(expected) + 1, policy)
    assert result[: len(expected)] == expected and result[-1] > end
    rows = preview(expression, zone, after, len(expected) + 1, policy)
    assert [row.at for row in rows if row.fires] == result
    assert all(a.at <= b.at for a, b in pairwise(rows))
    assert all(row.dst == "skipped" for row in rows if not row.fires)
    assert all(row.wall.minute in minutes and row.wall.hour in hour_set for row in rows)


def at_utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)
