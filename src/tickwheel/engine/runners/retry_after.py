"""``Retry-After`` (RFC 9110, 10.2.3) read as a snooze: a server that says when to come back
is waited for, without the attempt counting as a failure, up to a bound (a server must not
park an execution for days)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Final

__all__ = ["RETRY_AFTER_MAX", "retry_after"]

RETRY_AFTER_MAX: Final = 300.0
"""Seconds: a longer Retry-After is cut to this."""
_MIN: Final = 0.001


def retry_after(headers: Mapping[str, str], bound: float) -> float | None:
    """Seconds to wait from ``Retry-After`` (delay-seconds, or an HTTP-date counted from the
    answer's ``Date``, else from now), cut to ``bound``; None when absent or unreadable."""
    value = headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
            sent = parsedate_to_datetime(headers["date"]) if "date" in headers else None
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # "-0000" dates: UTC by the RFC
            when = when.replace(tzinfo=UTC)
        base = sent if sent is not None and sent.tzinfo is not None else datetime.now(UTC)
        seconds = (when - base).total_seconds()
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, _MIN), bound)
