"""How SQLite holds values it has no type for: instants as integer microseconds (UTC), JSON as
text read back defensively."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tickwheel.domain.jsonvalues import load_readable, readable_object

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(value: datetime) -> int:
    if value.tzinfo is None:
        raise ValueError("naive datetimes are not stored: attach a timezone")
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def opt_us(value: datetime | None) -> int | None:
    return to_us(value) if value is not None else None


def from_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def jload(text: str | None) -> Any:
    """A JSON column's value, made safe to show: a row stored before the edge checked values (a
    lone surrogate, a value nested 900 deep, text that is not JSON) must not break each read."""
    return load_readable(text) if text is not None else None


def jload_object(text: str) -> dict[str, Any]:
    return readable_object(jload(text))
