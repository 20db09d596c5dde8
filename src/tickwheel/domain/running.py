"""What a running handler may tell the scheduler besides its result: how far it got (progress),
where to resume (checkpoint), that it wants to run again later (snooze), and what it is told
back (cancelled). Pure rules and their limits; the worker carries them (engine/cancellation.py).

Checks raise ``ValueError`` with a message meant for the handler's author: a handler that reports
nonsense fails its attempt with that message rather than storing it."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any, Final

from tickwheel.domain.jsonvalues import first_problem, text_problem

__all__ = [
    "CHECKPOINT_LIMIT",
    "MAX_SNOOZE",
    "MESSAGE_LIMIT",
    "Cancelled",
    "Snooze",
    "checkpoint_value",
    "progress_value",
]

CHECKPOINT_LIMIT: Final = 16 * 1024
"""Bytes of a checkpoint as compact JSON: it rides on the executions row and every heartbeat."""
MESSAGE_LIMIT: Final = 500
"""Characters of a progress message."""
MAX_SNOOZE: Final = 7 * 24 * 3600.0
"""Seconds a handler may snooze at once (a week): longer waits are schedules, not snoozes."""


class Cancelled(Exception):
    """Raised into a handler whose execution was cancelled while it ran: by ``context.progress``
    and ``context.save_checkpoint`` in a sync handler; an async handler gets
    ``asyncio.CancelledError`` at its next await instead. Let it propagate: the attempt ends
    CANCELLED either way, and what the handler returns after a cancel is dropped."""


class Snooze(Exception):
    """Raise (or return) ``Snooze(seconds)`` from a handler to run again that much later. Not a
    failure: the attempt is recorded as snoozed and the retry budget is unchanged."""

    def __init__(self, seconds: float, reason: str = "") -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ValueError(f"Snooze takes seconds as a number, got {type(seconds).__name__}")
        if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_SNOOZE:
            raise ValueError(
                f"Snooze seconds must be > 0 and at most {MAX_SNOOZE:g}, got {seconds}"
            )
        super().__init__(f"snooze {seconds:g} s" + (f": {reason}" if reason else ""))
        self.seconds = float(seconds)
        self.reason = reason[:MESSAGE_LIMIT]


def progress_value(fraction: float, message: str, at: datetime) -> dict[str, Any]:
    """The stored form of one progress report: ``fraction`` in [0, 1], a short message."""
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise ValueError(f"progress takes a fraction as a number, got {type(fraction).__name__}")
    if not 0.0 <= fraction <= 1.0:  # also refuses NaN
        raise ValueError(f"progress fraction must be between 0 and 1, got {fraction}")
    if not isinstance(message, str):
        raise ValueError(f"progress message must be text, got {type(message).__name__}")
    problem = text_problem(message)
    if problem is not None:  # the heartbeat's write would fail on it, every beat after
        raise ValueError(f"progress message {problem}")
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 1] + "…"
    return {"fraction": float(fraction), "message": message, "at": at.isoformat()}


def checkpoint_value(value: Any) -> Any:
    """``value`` if it can be kept as a checkpoint: JSON, at most ``CHECKPOINT_LIMIT`` bytes."""
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"a checkpoint must be JSON: {exc}") from exc
    if value is None:
        raise ValueError("a checkpoint cannot be null (nothing to resume from)")
    problem = first_problem(value)
    if problem is not None:  # what the store refuses or cannot read back (domain.jsonvalues)
        raise ValueError(f"a checkpoint cannot be stored: it {problem}")
    size = len(text.encode())
    if size > CHECKPOINT_LIMIT:
        raise ValueError(
            f"a checkpoint is at most {CHECKPOINT_LIMIT} bytes as JSON, this one is {size}:"
            " keep where to resume, not the data"
        )
    return json.loads(text)
