"""Cron syntax and calendar: parsing, errors that say where, macros, 6 fields, L/W/#, the
day-of-month OR day-of-week rule, checked against croniter at the end. Daylight saving is in
test_cron_dst.py, the dstPolicy in test_cron_policy.py, the preview in test_cron_preview.py."""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from tickwheel.domain.cron import (
    CronExpression,
    DstPolicy,
    fire_time,
    fire_times,
    next_fire_times,
    parse_expression,
    parse_timezone,
    preview,
)
from tickwheel.domain.errors import FieldError, InvalidInput


def at(text: str) -> datetime:
    """``"2026-03-29 01:00"`` or ``"2026-03-29 01:00:30"`` read as UTC."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def fires(expression: str, after: str, count: int, zone: str = "UTC") -> list[datetime]:
    return fire_times(parse_expression(expression), ZoneInfo(zone), at(after), count)


def days(*texts: str) -> list[datetime]:
    """Midnights UTC of the given dates."""
    return [at(f"{text} 00:00") for text in texts]


# -- parsing ------------------------------------------------------------------------------


def test_five_fields_get_a_zero_seconds_field_in_front() -> None:
    expr = parse_expression("  30 2 * * mon-fri ")
    assert expr == CronExpression("30 2 * * mon-fri", ("0", "30", "2", "*", "*", "MON-FRI"), False)
    assert expr.normalized == "0 30 2 * * MON-FRI"


def test_six_fields_put_seconds_first() -> None:
    expr = parse_expression("15 30 2 * * *")
    assert expr.fields == ("15", "30", "2", "*", "*", "*")
    assert expr.has_seconds


@pytest.mark.parametrize(
    ("expression", "elapsed"),
    [
        ("30 2 * * *", False),
        ("*/15 2 * * *", False),
        ("0 2,14 * * *", False),
        ("0 1-5 * * *", False),
        ("@daily", False),
        ("0 * * * *", True),
        ("*/15 * * * *", True),
        ("0 */2 * * *", True),
        ("0 1-23/2 * * *", True),
        ("0 3/4 * * *", True),
        ("@hourly", True),
        ("0 0 * * * *", True),
        ("0 30 2 * * *", False),
    ],
)
def test_the_hour_field_decides_fixed_time_or_elapsed_time(expression: str, elapsed: bool) -> None:
    assert parse_expression(expression).follows_elapsed_time is elapsed


@pytest.mark.parametrize(
    ("macro", "fields"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@DAILY", "0 0 * * *"),
    ],
)
def test_macros_expand_to_their_five_field_form(macro: str, fields: str) -> None:
    expr = parse_expression(macro)
    assert expr.fields == ("0", *fields.split())
    assert expr.text == macro
    assert not expr.has_seconds


def invalid(expression: str) -> FieldError:
    with pytest.raises(InvalidInput) as caught:
        parse_expression(expression)
    assert len(caught.value.errors) == 1
    error = caught.value.errors[0]
    assert error.path == "expression"
    assert error.message in caught.value.message
    return error


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("0 25 * * *", "field 2 (hour): 25 is out of range 0-23"),
        ("60 * * * *", "field 1 (minute): 60 is out of range 0-59"),
        ("0 0 0 * *", "field 3 (day-of-month): 0 is out of range 1-31"),
        ("0 0 * 13 *", "field 4 (month): 13 is out of range 1-12"),
        ("0 0 * * 8", "field 5 (day-of-week): 8 is out of range 0-7"),
        ("60 0 2 * * *", "field 1 (second): 60 is out of range 0-59"),
        ("0 0 25 * * *", "field 3 (hour): 25 is out of range 0-23"),
        ("0 0 * FOO *", "field 4 (month): 'FOO' is not a number or a name (JAN-DEC)"),
        ("0 0 * * FUN", "field 5 (day-of-week): 'FUN' is not a number or a name (SUN-SAT)"),
        ("x * * * *", "field 1 (minute): 'X' is not a number"),
        ("1,,2 * * * *", "field 1 (minute): empty item in list '1,,2'"),
        ("5-3 * * * *", "field 1 (minute): range 5-3 goes backwards: its start is after its end"),
        ("0 0 * * SAT-SUN", "field 5 (day-of-week): range SAT-SUN goes backwards"),
        ("-5 * * * *", "field 1 (minute): range '-5' is missing a number"),
        ("*/0 * * * *", "field 1 (minute): '*/0': the step after / must be a whole number"),
        ("*/60 * * * *", "field 1 (minute): '*/60': step 60 is larger than the range 0-59"),
        ("0 */x * * *", "field 2 (hour): '*/X': the step after / must be a whole number"),
        ("0 0 30 2 *", "field 3 (day-of-month): '30' never occurs in the months '2'"),
        ("0 0 31 4,6 *", "field 3 (day-of-month): '31' never occurs in the months '4,6'"),
        ("0 0 15W * MON", "field 3 (day-of-month): '15W' picks one day a month and cannot be"),
        ("0 0 1W,15W * *", "field 3 (day-of-month): '1W': W takes one day on its own"),
        ("0 0 32W * *", "field 3 (day-of-month): 32 is out of range 1-31"),
        ("0 0 W * *", "field 3 (day-of-month): 'W': W takes a day number before it"),
        ("0 0 ? * ?", "fields 3 and 5: '?' may stand in only one of day-of-month and day-of-week"),
        ("0 ? * * *", "field 2 (hour): '?' is only allowed in day-of-month or day-of-week"),
        ("0 0 ?,1 * *", "field 3 (day-of-month): '?' stands alone in its field"),
        ("0 0 L/2 * *", "field 3 (day-of-month): 'L' cannot be part of a range or a step"),
        ("0 L * * *", "field 2 (hour): 'L': L, W and # are only allowed in the day fields"),
        ("0 0 * * L", "field 5 (day-of-week): 'L': L takes a day number before it"),
        ("0 0 * * FRIL", "field 5 (day-of-week): 'FRIL': L takes a day number before it"),
        ("0 0 * * MON#6", "field 5 (day-of-week): 'MON#6': the number after # must be 1-5"),
        ("0 0 * * MON#0", "field 5 (day-of-week): 'MON#0': the number after # must be 1-5"),
        ("0 0 * * 9#2", "field 5 (day-of-week): 9 is out of range 0-7"),
        ("* * *", "expected 5 fields (minute hour day-of-month month day-of-week) or 6 with"),
        ("* * * * * * *", "or 6 with seconds first, got 7"),
        ("   ", "the expression is empty"),
        ("@reboot", "unknown macro @reboot; use one of @yearly, @annually, @monthly, @weekly"),
        ("@daily 5", "unknown macro @daily 5"),
    ],
)
def test_errors_say_which_field_and_which_value(expression: str, message: str) -> None:
    assert message in invalid(expression).message


def test_the_error_message_names_the_expression() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_expression("0 25 * * *")
    assert caught.value.message == (
        "invalid cron expression '0 25 * * *': field 2 (hour): 25 is out of range 0-23"
    )
    assert caught.value.details == [
        {"path": "expression", "message": "field 2 (hour): 25 is out of range 0-23"}
    ]


@pytest.mark.parametrize(
    "expression",
    [
        "* * * * *",
        "0-59/5 0-23 1-31 1-12 0-7",
        "5,10,15-20/2 */3 1,15,L 1/3 MON-FRI",
        "0 0 L * *",
        "0 0 LW * *",
        "0 0 1,LW * *",
        "0 0 * * 5L",
        "0 0 * * 0L,MON#1",
        "0 0 * * MON#5",
        "0 0 * JAN-MAR,dec sun",
        "0 0 29 2 *",
        "*/59 * * * * *",
        "0 0 */7 * *",
    ],
)
def test_valid_expressions_parse(expression: str) -> None:
    parse_expression(expression)


# -- timezones ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Etc/GMT+5"]
)
def test_known_timezones_parse(name: str) -> None:
    assert parse_timezone(name) == ZoneInfo(name)


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("europe/berlin", "did you mean 'Europe/Berlin'?"),
        ("Europe/Berln", "did you mean 'Europe/Berlin'"),
        (" UTC", "did you mean 'UTC'?"),
        ("Nowhere", "use an IANA name such as 'Europe/Berlin', 'America/New_York' or 'UTC'"),
        ("", "use an IANA name such as"),
        ("../etc/passwd", "use an IANA name such as"),
        ("localtime", "use an IANA name such as"),
        ("posixrules", "use an IANA name such as"),
    ],
)
def test_unknown_timezones_are_invalid_input_with_a_hint(name: str, hint: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_timezone(name)
    (error,) = caught.value.errors
    assert error.path == "timezone"
    assert error.message.startswith(f"unknown timezone {name!r}; ")
    assert hint in error.message


# -- the call itself -----------------------------------------------------------------------


def test_results_are_utc_and_strictly_after_an_instant_in_any_offset() -> None:
    plus_two = timezone(timedelta(hours=2))
    after = datetime(2026, 6, 1, 4, 30, tzinfo=plus_two)  # 02:30Z: a fire time itself
    result = fire_times(parse_expression("30 2 * * *"), ZoneInfo("UTC"), after, 2)
    assert result == [at("2026-06-02 02:30"), at("2026-06-03 02:30")]
    assert all(r.tzinfo is UTC for r in result)


def test_microseconds_in_after_do_not_lose_the_next_second() -> None:
    after = datetime(2026, 6, 1, 2, 29, 59, 999_999, tzinfo=UTC)
    assert fire_time(parse_expression("30 2 * * *"), ZoneInfo("UTC"), after) == at(
        "2026-06-01 02:30"
    )


def test_count_zero_is_empty_and_fire_time_is_the_first() -> None:
    expr, utc = parse_expression("0 * * * *"), ZoneInfo("UTC")
    assert fire_times(expr, utc, at("2026-06-01 00:00"), 0) == []
    assert fire_time(expr, utc, at("2026-06-01 00:00")) == at("2026-06-01 01:00")


def test_a_naive_after_or_a_negative_count_is_invalid_input() -> None:
    expr, utc = parse_expression("0 * * * *"), ZoneInfo("UTC")
    with pytest.raises(InvalidInput) as caught:
        fire_times(expr, utc, datetime(2026, 6, 1), 1)
    assert caught.value.errors[0].path == "after"
    with pytest.raises(InvalidInput) as caught:
        fire_times(expr, utc, at("2026-06-01 00:00"), -1)
    assert caught.value.errors[0].path == "count"


def test_running_off_the_end_of_time_returns_what_there_is() -> None:
    result = fires("0 0 1 1 *", "9997-06-01 00:00", 5)
    assert result == days("9998-01-01", "9999-01-01")
    assert [row.at for row in preview("0 0 1 1 *", "UTC", at("9997-06-01 00:00"), 5)] == result
    assert fire_time(parse_expression("0 0 1 1 *"), ZoneInfo("UTC"), at("9999-06-01 00:00")) is None


# -- calendar ------------------------------------------------------------------------------


def test_plain_fields_names_ranges_lists_and_steps() -> None:
    assert fires("0 8-18/5 * * *", "2026-06-01 00:00", 4) == [
        at("2026-06-01 08:00"),
        at("2026-06-01 13:00"),
        at("2026-06-01 18:00"),
        at("2026-06-02 08:00"),
    ]
    assert fires("5/20 9 * * *", "2026-06-01 00:00", 3) == [
        at("2026-06-01 09:05"),
        at("2026-06-01 09:25"),
        at("2026-06-01 09:45"),
    ]
    # 2026-06-30 is a Tuesday; July only, weekdays only.
    assert fires("0 9 * jan,JUL mon-fri", "2026-06-30 12:00", 4) == [
        at("2026-07-01 09:00"),
        at("2026-07-02 09:00"),
        at("2026-07-03 09:00"),
        at("2026-07-06 09:00"),
    ]


def test_sunday_is_both_0_and_7() -> None:
    # 2026-06-07 and 2026-06-14 are Sundays.
    expected = days("2026-06-07", "2026-06-14")
    assert fires("0 0 * * 0", "2026-06-01 00:00", 2) == expected
    assert fires("0 0 * * 7", "2026-06-01 00:00", 2) == expected
    assert fires("0 0 * * SUN", "2026-06-01 00:00", 2) == expected


def test_six_fields_fire_on_seconds() -> None:
    assert fires("*/20 * * * * *", "2026-06-01 10:00:05", 4) == [
        at("2026-06-01 10:00:20"),
        at("2026-06-01 10:00:40"),
        at("2026-06-01 10:01:00"),
        at("2026-06-01 10:01:20"),
    ]
    assert fires("30 0 12 * * *", "2026-06-01 12:00:30", 1) == [at("2026-06-02 12:00:30")]
    assert fires("0 30 2 * * *", "2026-06-01 00:00", 1) == [at("2026-06-01 02:30")]


def test_last_day_of_the_month() -> None:
    assert fires("0 0 L * *", "2026-02-01 00:00", 4) == days(
        "2026-02-28", "2026-03-31", "2026-04-30", "2026-05-31"
    )
    assert fires("0 0 L 2 *", "2027-03-01 00:00", 2) == days("2028-02-29", "2029-02-28")


def test_last_weekday_of_the_month() -> None:
    # 2026-02-28 is a Saturday and 2026-05-31 a Sunday: both move back to Friday.
    assert fires("0 0 LW * *", "2026-02-01 00:00", 4) == days(
        "2026-02-27", "2026-03-31", "2026-04-30", "2026-05-29"
    )


def test_last_given_weekday_of_the_month() -> None:
    assert fires("0 0 * * 5L", "2026-02-01 00:00", 3) == days(
        "2026-02-27", "2026-03-27", "2026-04-24"
    )


def test_nth_weekday_of_the_month() -> None:
    assert fires("0 0 * * MON#2", "2026-02-01 00:00", 3) == days(
        "2026-02-09", "2026-03-09", "2026-04-13"
    )
    # A fifth Monday: March and June of 2026 have one, the months between do not.
    assert fires("0 0 * * 1#5", "2026-01-01 00:00", 2) == days("2026-03-30", "2026-06-29")


def test_both_day_fields_restricted_means_either_matches() -> None:
    # The 13th of the month OR any Friday (classic cron; 2026-03-13 is both).
    assert fires("0 0 13 * FRI", "2026-03-01 00:00", 8) == days(
        "2026-03-06",
        "2026-03-13",
        "2026-03-20",
        "2026-03-27",
        "2026-04-03",
        "2026-04-10",
        "2026-04-13",
        "2026-04-17",
    )


def test_either_day_field_rule_holds_for_a_whole_year() -> None:
    result = fires("0 12 1,15 * WED", "2025-12-31 12:00", 200)
    year = [r for r in result if r.year == 2026]
    expected = [
        datetime(2026, month, day, 12, tzinfo=UTC)
        for month in range(1, 13)
        for day in range(1, calendar.monthrange(2026, month)[1] + 1)
        if day in (1, 15) or date(2026, month, day).weekday() == calendar.WEDNESDAY
    ]
    assert year == expected


def test_a_day_field_starting_with_a_star_makes_it_and_again() -> None:
    # Classic cron's quirk, kept: "*/2" counts as unrestricted, so this is Mondays that are
    # also odd days, not "odd days or Mondays". docs/cron.md says so.
    assert fires("0 0 */2 * MON", "2026-03-01 00:00", 4) == days(
        "2026-03-09", "2026-03-23", "2026-04-13", "2026-04-27"
    )


def test_a_date_that_comes_once_every_four_years() -> None:
    assert fires("0 0 29 2 *", "2026-01-01 00:00", 2) == days("2028-02-29", "2032-02-29")


# -- checked against a second library: croniter (a dev dependency) --------------------------
# croniter is no reference for DST or for the quirks listed in docs/cron.md, so the table
# leaves those out: fire times away from DST transitions (asserted), classic syntax croniter
# reads the same way. Both day fields restricted is in: croniter ORs them as we do, unless a
# field starts with "*" or uses "#" (docs/cron.md lists what croniter does there).

CRONITER_TABLE = [
    *("* * * * *", "*/7 * * * *", "5/20 9 * * *", "0 8-18/5 * * *", "15,45 */3 * * *"),
    *("30 2 * * *", "0 9 * * MON-FRI", "0 0 * * 0", "0 0 * * 7", "0 0 * * SAT,SUN"),
    *("0 0 * * */2", "0 12 1 * *", "0 0 L * *", "0 0 1,L * *", "0 0 L 2 *", "0 0 29 2 *"),
    *("0 0 31 * *", "0 0 */7 * *", "0 0 1-31/2 * *", "0 6 * JAN-MAR,dec *", "0 0 * */3 *"),
    *("0 0 1 1 *", "0 0 * * MON#2", "0 0 * * 1#5", "0 0 * * MON#1,WED#3"),
    *("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"),
    *("0 0 13 * FRI", "0 12 1,15 * WED", "0 0 L * FRI", "0 0 1-7 * MON"),
    *("15 30 2 * * *", "*/20 * * * * *", "0 0 12 * * MON", "0 */5 * * * *"),
]
AWAY_FROM_DST = [
    ("UTC", "2026-01-01 00:00"),
    ("UTC", "2026-03-29 00:30"),  # UTC has no transitions: Europe's dates are nothing special
    ("UTC", "2026-10-25 00:30"),
    ("UTC", "2027-12-31 23:59"),
    ("Europe/Berlin", "2026-06-01 00:00"),
    ("America/New_York", "2026-12-01 12:00"),
    ("Asia/Kathmandu", "2026-03-29 00:00"),  # +05:45
    ("Australia/Lord_Howe", "2026-06-01 00:00"),  # +10:30
]


def croniter_times(expression: str, zone: str, after: datetime, count: int) -> list[datetime]:
    seconds_first = len(expression.split()) == 6  # croniter's own 6-field form ends in seconds
    it = croniter(expression, after.astimezone(ZoneInfo(zone)), second_at_beginning=seconds_first)
    return [it.get_next(datetime).astimezone(UTC) for _ in range(count)]


@pytest.mark.parametrize(("zone", "after"), AWAY_FROM_DST)
@pytest.mark.parametrize("expression", CRONITER_TABLE)
def test_agrees_with_croniter_away_from_dst(expression: str, zone: str, after: str) -> None:
    rows = preview(expression, zone, at(after), 12)
    assert all(row.fires and row.dst is None for row in rows)  # no transition involved
    assert [row.at for row in rows] == croniter_times(expression, zone, at(after), 12)


@pytest.mark.parametrize(
    ("zone", "after"),
    [
        ("Europe/Berlin", "2026-03-28 12:00"),
        ("Europe/Berlin", "2026-10-24 12:00"),
        ("America/New_York", "2026-03-07 18:00"),
        ("America/New_York", "2026-10-31 18:00"),
    ],
)
@pytest.mark.parametrize(
    "expression",
    ["30 2 * * *", "0 1 * * *", "*/15 2 * * *", "0,30 1-3 * * *", "0 * * * *", "*/20 * * * *"],
)
def test_croniter_crosses_whole_hour_transitions_like_dst_policy_both(
    expression: str, zone: str, after: str
) -> None:
    # croniter 7 shifts a nonexistent time forward and fires a repeated one twice: our
    # DstPolicy(ambiguous="both"). It agrees on fixed hours and "*" in whole-hour zones.
    both = DstPolicy(ambiguous="both")
    ours = next_fire_times(expression, zone, at(after), 30, both)
    assert ours == croniter_times(expression, zone, at(after), 30)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # The weekday nearest the 15th: 15 Feb and 15 Mar 2026 are Sundays.
        ("0 9 15W * *", ["2026-01-15", "2026-02-16", "2026-03-16", "2026-04-15"]),
        # 1W never leaves the month: Sunday 1 Feb moves to Monday 2 Feb (not back to January).
        ("0 9 1W * ?", ["2026-01-01", "2026-02-02", "2026-03-02", "2026-04-01"]),
        # 31W: Saturday 31 Jan moves back to Friday 30; months without a 31st do not fire.
        ("0 9 31W * *", ["2026-01-30", "2026-03-31", "2026-05-29", "2026-07-31"]),
        # ? leaves the other day field to decide, as * does.
        ("0 9 ? * MON", ["2026-01-05", "2026-01-12", "2026-01-19", "2026-01-26"]),
        ("0 9 1 * ?", ["2026-01-01", "2026-02-01", "2026-03-01", "2026-04-01"]),
    ],
)
def test_nearest_weekday_and_no_specific_value(expression: str, expected: list[str]) -> None:
    times = next_fire_times(expression, "UTC", datetime(2026, 1, 1, tzinfo=UTC), 4)
    assert [t.date().isoformat() for t in times] == expected
    assert all(t.hour == 9 for t in times)
