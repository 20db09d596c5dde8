"""How SQLite holds values it has no type for: instants as integer microseconds (UTC)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

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
    return json.loads(text) if text is not None else None
