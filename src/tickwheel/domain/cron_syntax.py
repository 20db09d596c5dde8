"""The syntax of a cron expression, checked field by field before cronsim sees it, so that the
message can say which field and which value is wrong (cronsim's own errors only name the field).

``split`` reads the fields (or a macro), ``no_specific`` handles Quartz's ``?`` and ``nW``,
``check_field`` checks one field's terms in the order cronsim reads them. A problem is a
``Problem``; ``cron.parse_expression`` turns it into ``InvalidInput``."""

from __future__ import annotations

import re
from dataclasses import dataclass

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


@dataclass(frozen=True)
class Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    first_name_value: int = 0


SECOND, MINUTE, HOUR = Field("second", 0, 59), Field("minute", 0, 59), Field("hour", 0, 23)
DAY_OF_MONTH = Field("day-of-month", 1, 31)
MONTH = Field("month", 1, 12, MONTH_NAMES, 1)
DAY_OF_WEEK = Field("day-of-week", 0, 7, DAY_NAMES, 0)
FIELDS = (SECOND, MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK)


NEAREST = re.compile(r"^(\d{1,2})W$")


class Problem(Exception):
    """A syntax problem in one field; ``parse_expression`` adds the field's position."""


def split(text: str) -> list[str]:
    if not text:
        raise Problem("the expression is empty")
    if text.startswith("@"):
        macro = MACROS.get(text.lower())
        if macro is None:
            raise Problem(f"unknown macro {text}; use one of {', '.join(MACROS)}")
        return macro.split()
    parts = text.upper().split()
    if len(parts) not in (5, 6):
        raise Problem(
            f"expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds "
            f"first, got {len(parts)}"
        )
    return parts


def no_specific(fields: tuple[str, ...], offset: int) -> tuple[str, ...]:
    """Quartz's ``?`` ("no specific value") in one day field is ``*``: with classic cron's rule,
    an unrestricted day field leaves the other to decide. ``nW`` needs the other to be free."""
    day, weekday = fields[3], fields[5]
    position = 4 - offset
    if day == "?" and weekday == "?":
        raise Problem(
            f"fields {position} and {position + 2}: '?' may stand in only one of day-of-month "
            "and day-of-week"
        )
    if NEAREST.match(day) and weekday not in ("*", "?"):
        raise Problem(
            f"field {position} (day-of-month): {day!r} picks one day a month and cannot be "
            "combined with a day-of-week; put ? or * there"
        )
    return tuple("*" if field == "?" else field for field in fields)


def six(fields: tuple[str, ...]) -> tuple[str, str, str, str, str, str]:
    second, minute, hour, day, month, weekday = fields
    return second, minute, hour, day, month, weekday


def check_field(index: int, position: int, value: str) -> None:
    field = FIELDS[index]
    if value == "?" and field in (DAY_OF_MONTH, DAY_OF_WEEK):
        return
    try:
        for term in value.split(","):
            _check_term(field, term, value)
    except Problem as problem:
        raise Problem(f"field {position} ({field.name}): {problem}") from None


def _check_term(field: Field, term: str, value: str) -> None:
    """Mirrors the order in which cronsim reads a term, so that what passes here passes there."""
    if term == "":
        raise Problem(f"empty item in list {value!r}")
    if term == "*":
        return
    if field is DAY_OF_WEEK and "L" in term:
        _check_last_weekday(term)
    elif field is DAY_OF_WEEK and "#" in term:
        _check_nth_weekday(term)
    elif "/" in term:
        _check_step(field, term)
    elif "-" in term:
        _check_range(field, term)
    elif field is DAY_OF_MONTH and term in ("L", "LW"):
        return
    elif field is DAY_OF_MONTH and NEAREST.match(term):
        if term != value:
            raise Problem(f"{term!r}: W takes one day on its own, not in a list")
        _value(field, term[:-1])
    else:
        _value(field, term)


def _check_last_weekday(term: str) -> None:
    day = term[:-1]
    if not term.endswith("L") or not day.isdigit():
        raise Problem(f"{term!r}: L takes a day number before it, e.g. 5L (the last Friday)")
    _value(DAY_OF_WEEK, day)


def _check_nth_weekday(term: str) -> None:
    day, nth = term.split("#", 1)
    _value(DAY_OF_WEEK, day)
    if not nth.isdigit() or not 1 <= int(nth) <= 5:
        raise Problem(f"{term!r}: the number after # must be 1-5 (the nth such day of the month)")


def _check_step(field: Field, term: str) -> None:
    base, step = term.split("/", 1)
    if base != "*":
        (_check_range if "-" in base else _value)(field, base)
    if not step.isdigit() or int(step) < 1:
        raise Problem(f"{term!r}: the step after / must be a whole number of at least 1")
    if int(step) > field.high - field.low:
        raise Problem(f"{term!r}: step {int(step)} is larger than the range {_span(field)}")


def _check_range(field: Field, term: str) -> None:
    start, end = term.split("-", 1)
    if not start or not end:
        raise Problem(f"range {term!r} is missing a number")
    if _value(field, start) > _value(field, end):
        hint = " (Sunday is both 0 and 7)" if field is DAY_OF_WEEK else ""
        raise Problem(f"range {term} goes backwards: its start is after its end{hint}")


def _value(field: Field, text: str) -> int:
    if text in field.names:
        return field.names.index(text) + field.first_name_value
    if not text.isdigit():
        raise Problem(_not_a_value(field, text))
    number = int(text)
    if not field.low <= number <= field.high:
        raise Problem(f"{number} is out of range {_span(field)}")
    return number


def _not_a_value(field: Field, text: str) -> str:
    if text == "":
        return "a number is missing"
    if text == "?":
        if field in (DAY_OF_MONTH, DAY_OF_WEEK):
            return "'?' stands alone in its field (no list, range or step)"
        return "'?' is only allowed in day-of-month or day-of-week"
    if field is DAY_OF_MONTH and text in ("L", "LW"):
        return f"{text!r} cannot be part of a range or a step"
    if field is DAY_OF_MONTH and text.endswith("W"):
        return f"{text!r}: W takes a day number before it, e.g. 15W (the weekday nearest the 15th)"
    if text in ("L", "LW", "W") or "#" in text:
        return f"{text!r}: L, W and # are only allowed in the day fields (see docs/cron.md)"
    if field.names:
        return f"{text!r} is not a number or a name ({field.names[0]}-{field.names[-1]})"
    return f"{text!r} is not a number"


def _span(field: Field) -> str:
    return f"{field.low}-{field.high}"
