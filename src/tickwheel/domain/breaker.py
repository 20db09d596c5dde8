"""The circuit breaker of a Job Definition (issue 14): when its attempts keep failing, the
definition pauses itself instead of burning every due execution against a broken dependency.

Pure: the store reads a breaker's row, calls ``after_attempt`` or ``start_probe`` and writes the
answer in the same transaction, so every worker agrees on one state. A breaker is kept per tenant
and definition: one tenant's failures never pause another tenant's use of a shared definition.

    CLOSED --N consecutive failures, or failureRate over window--> OPEN (the definition pauses)
    OPEN --coolDown over, one READY execution chosen as the probe--> HALF_OPEN
    HALF_OPEN --the probe's attempt succeeds--> CLOSED (the pause is lifted)
    HALF_OPEN --the probe's attempt fails--> OPEN (another coolDown)

Attempts that finish while the breaker is OPEN (they were running when it opened), and any but
the probe's while HALF_OPEN, change nothing: they say nothing about the dependency now."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from tickwheel.domain.errors import ErrorList
from tickwheel.domain.fieldtypes import check_keys, describe, read_positive_int, read_seconds

BREAKER_KEYS: Final = ("consecutiveFailures", "failureRate", "window", "coolDown")
MAX_WINDOW: Final = 1000
"""The outcomes a breaker remembers are stored in its row: bounded."""
MAX_COOL_DOWN: Final = 7 * 86400.0
_UNITS: Final = {"s": 1, "m": 60, "h": 3600}


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class BreakerConfig:
    """``circuitBreaker`` of a definition file. At least one of the two triggers is set."""

    consecutive_failures: int | None = None
    failure_rate: float | None = None
    """Opens when at least this share of the last ``window`` attempts failed (a full window)."""
    window: int = 20
    cool_down: float = 60.0
    """Seconds the breaker stays OPEN before it lets one probe through."""


@dataclass(frozen=True)
class Breaker:
    """A breaker's stored state. ``recent`` holds the last outcomes while CLOSED, oldest first,
    one character each (``s`` succeeded, ``f`` failed)."""

    state: BreakerState = BreakerState.CLOSED
    consecutive_failures: int = 0
    recent: str = ""
    cool_down_until: datetime | None = None
    probe_execution_id: uuid.UUID | None = None


@dataclass(frozen=True)
class Transition:
    from_state: BreakerState
    to_state: BreakerState
    reason: str


def after_attempt(
    config: BreakerConfig,
    breaker: Breaker,
    execution_id: uuid.UUID,
    failed: bool,
    now: datetime,
) -> tuple[Breaker, Transition | None]:
    """The breaker after one finished attempt of its definition, and the transition it made."""
    if breaker.state is BreakerState.HALF_OPEN:
        if execution_id != breaker.probe_execution_id:
            return breaker, None
        if failed:
            return _open(config, breaker, now, f"the probe (execution {execution_id}) failed")
        closed = Breaker()
        reason = f"the probe (execution {execution_id}) succeeded"
        return closed, Transition(BreakerState.HALF_OPEN, BreakerState.CLOSED, reason)
    if breaker.state is BreakerState.OPEN:
        return breaker, None
    recent = (breaker.recent + ("f" if failed else "s"))[-config.window :]
    streak = breaker.consecutive_failures + 1 if failed else 0
    counted = replace(breaker, consecutive_failures=streak, recent=recent)
    if config.consecutive_failures is not None and streak >= config.consecutive_failures:
        return _open(config, counted, now, f"{streak} consecutive failed attempts")
    if (
        config.failure_rate is not None
        and len(recent) >= config.window
        and recent.count("f") >= config.failure_rate * config.window
    ):
        failures = recent.count("f")
        why = f"{failures} of the last {config.window} attempts failed"
        return _open(config, counted, now, f"{why} (failureRate {config.failure_rate:g})")
    return counted, None


def _open(
    config: BreakerConfig, breaker: Breaker, now: datetime, reason: str
) -> tuple[Breaker, Transition]:
    opened = Breaker(
        state=BreakerState.OPEN, cool_down_until=now + timedelta(seconds=config.cool_down)
    )
    return opened, Transition(breaker.state, BreakerState.OPEN, reason)


def start_probe(breaker: Breaker, execution_id: uuid.UUID) -> tuple[Breaker, Transition]:
    """OPEN past its cool-down -> HALF_OPEN with ``execution_id`` as the one attempt let through."""
    probing = replace(breaker, state=BreakerState.HALF_OPEN, probe_execution_id=execution_id)
    reason = f"cool-down over: execution {execution_id} is the probe"
    return probing, Transition(breaker.state, BreakerState.HALF_OPEN, reason)


# -- the definition file's block -------------------------------------------------------------------


def read_breaker(raw: Any, errors: ErrorList) -> BreakerConfig | None:
    """``circuitBreaker`` of a definition document; None when absent or wrong (errors added)."""
    if raw is None:
        return None
    path = "circuitBreaker"
    if not isinstance(raw, Mapping):
        errors.add(path, f"must be a mapping with keys {', '.join(BREAKER_KEYS)}")
        return None
    before = len(errors.items)
    check_keys(raw, BREAKER_KEYS, path, errors)
    streak = None
    if raw.get("consecutiveFailures") is not None:
        streak = read_positive_int(
            raw.get("consecutiveFailures"), f"{path}.consecutiveFailures", errors, None
        )
    rate = raw.get("failureRate")
    if rate is not None and (
        isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate <= 1
    ):
        errors.add(f"{path}.failureRate", f"must be a number in (0, 1], got {describe(rate)}")
        rate = None
    window = read_positive_int(raw.get("window"), f"{path}.window", errors, 20)
    if window is not None and window > MAX_WINDOW:
        errors.add(f"{path}.window", f"must be at most {MAX_WINDOW}, got {window}")
    cool_down = read_seconds(
        duration_seconds(raw.get("coolDown")), f"{path}.coolDown", errors, 60.0
    )
    if cool_down is not None and cool_down > MAX_COOL_DOWN:
        errors.add(f"{path}.coolDown", f"must be at most {MAX_COOL_DOWN:g} s (7 days)")
    if raw.get("consecutiveFailures") is None and raw.get("failureRate") is None:
        errors.add(path, "needs consecutiveFailures, failureRate or both")
    if len(errors.items) != before or window is None or cool_down is None:
        return None
    return BreakerConfig(streak, None if rate is None else float(rate), window, cool_down)


def duration_seconds(value: Any) -> Any:
    """``60s``, ``5m`` or ``1h`` as seconds (what a person writes in YAML); anything else is left
    for ``read_seconds`` to judge and name."""
    if isinstance(value, str) and value[-1:] in _UNITS:
        try:
            return float(value[:-1]) * _UNITS[value[-1]]
        except ValueError:
            return value
    return value


def breaker_to_document(config: BreakerConfig) -> dict[str, Any]:
    doc: dict[str, Any] = {"window": config.window, "coolDown": float(config.cool_down)}
    if config.consecutive_failures is not None:
        doc["consecutiveFailures"] = config.consecutive_failures
    if config.failure_rate is not None:
        doc["failureRate"] = config.failure_rate
    return doc
