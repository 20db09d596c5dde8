"""Handlers for the running-work tests (cancel, progress, checkpoint, snooze), named by
entrypoints such as ``tests.engine.running_jobs:copy_rows``."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from tickwheel import Cancelled, Snooze
from tickwheel.engine.runners import JobContext

SEEN: list[str] = []
"""What the handlers went through, in order, for the tests to read."""
STARTED = threading.Event()


async def copy_rows(rows: int, context: JobContext) -> dict[str, Any]:
    """Copies ``rows`` one at a time (each an await), reporting progress and a checkpoint, and
    resumes from the checkpoint of an earlier attempt."""
    start = context.checkpoint["row"] if context.checkpoint else 0
    STARTED.set()
    try:
        for row in range(start, rows):
            await asyncio.sleep(0.01)
            context.progress(row / rows, f"copied {row:,} rows")
            context.save_checkpoint({"row": row + 1})
    except asyncio.CancelledError:
        SEEN.append(f"cancelled at await, context.cancelled={context.cancelled}")
        raise
    return {"from": start}


def sync_loop(context: JobContext) -> dict[str, Any]:
    """A sync handler: it cannot be interrupted, so it hears the cancel from ``progress``."""
    STARTED.set()
    try:
        for step in range(100_000):
            threading.Event().wait(0.01)
            context.progress(min(step / 1000, 1.0))
    except Cancelled:
        SEEN.append(f"Cancelled from progress, context.cancelled={context.cancelled}")
        raise
    return {}


def fail_once_with_checkpoint(context: JobContext) -> dict[str, Any]:
    """Attempt 1 saves a checkpoint and fails; the next starts from it."""
    if context.checkpoint is None:
        context.save_checkpoint({"done": ["a", "b"]})
        raise RuntimeError("the network went away")
    return {"resumed": context.checkpoint["done"]}


def snooze_first(context: JobContext) -> dict[str, Any] | Snooze:
    """Snoozes twice (raised, then returned), then succeeds."""
    if context.attempt == 1:
        raise Snooze(60, "the upstream is busy")
    if context.attempt == 2:
        return Snooze(30)
    return {"attempt": context.attempt}
