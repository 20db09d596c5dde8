"""Capped exponential backoff with full jitter (DESIGN.md):
``delay = random(0, min(max_delay, base * 2^(n-1)))`` for the n-th failed attempt.

Full jitter spreads the retries of a burst of failures over the whole window instead of making
them all come back at once. The random source is injected so tests know the exact delay."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta

Uniform = Callable[[float, float], float]


def backoff_cap(attempt: int, base_delay: float, max_delay: float) -> float:
    """The upper bound of the delay after failed attempt number ``attempt`` (1-based)."""
    if attempt < 1:
        raise ValueError("attempt numbers start at 1")
    # 2^(n-1) overflows floats long after it passes any sane max_delay; cap the exponent.
    exponent = min(attempt - 1, 62)
    return min(max_delay, base_delay * float(2**exponent))


def backoff_delay(
    attempt: int, base_delay: float, max_delay: float, uniform: Uniform = random.uniform
) -> timedelta:
    return timedelta(seconds=uniform(0.0, backoff_cap(attempt, base_delay, max_delay)))
