"""The worker's side of running work (docs/flow-control.md, "Running work"): the heartbeat that
carries a handler's progress and checkpoint and brings back a cancel request, the result of an
attempt stopped by a cancel, and a snooze.

Hearing a cancel costs no round trip of its own: it is the answer of the heartbeat the lease
needs anyway. The attempt's task is then cancelled (an async handler gets CancelledError at its
next await, a command or container SIGTERM and, after the grace, SIGKILL; a sync handler sees
``context.cancelled`` and ``Cancelled`` from its next ``progress``/``save_checkpoint``), and the
attempt is reported CANCELLED through the result buffer, under its fencing token like any other
outcome: a zombie whose lease was taken over changes nothing."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from tickwheel.domain.models import Execution
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.engine.runners.attempt_state import AttemptState
from tickwheel.engine.runners.base import RunOutcome
from tickwheel.store.protocol import AttemptResult
from tickwheel.store.running_protocol import Beat, RunningStore

__all__ = ["CANCELLED_KIND", "SNOOZED_KIND", "beat", "cancelled_result", "snooze", "snooze_detail"]

CANCELLED_KIND = "cancelled"
"""The error kind of an attempt stopped by a cancel (and of its execution)."""
SNOOZED_KIND = "snoozed"
"""The error kind of an attempt that ended in a snooze (recorded ABANDONED: not a failure)."""


async def beat(
    store: RunningStore,
    execution: Execution,
    token: int,
    lease: timedelta,
    now: datetime | None,
    state: AttemptState,
) -> Beat | None:
    """One heartbeat carrying what the handler reported since the last; None: the lease is
    lost. A failed write keeps the reports for the next beat and raises."""
    pending = state.take()
    write = store.execution_beat(
        execution.execution_id,
        token,
        lease,
        now,
        progress=pending.progress,
        checkpoint=pending.checkpoint,
    )
    try:
        # Shielded: the heartbeat is cancelled when its attempt ends, maybe in the middle of
        # this write, and a transaction cut off between BEGIN and COMMIT would stay open on
        # SQLite's one connection. The write finishes on its own; only the wait is cancelled.
        return await asyncio.shield(write)
    except BaseException:
        state.give_back(pending)
        raise


def cancelled_result(execution: Execution, requested_at: datetime | None) -> AttemptResult:
    """The attempt and the execution end CANCELLED; the error says why, for the history."""
    token = execution.fencing_token
    assert token is not None
    error: dict[str, Any] = {
        "kind": CANCELLED_KIND,
        "message": "cancelled while running: a cancel of the execution was requested",
        "attempt": execution.attempt_count,
    }
    if requested_at is not None:
        error["cancelRequestedAt"] = requested_at.isoformat()
    return AttemptResult(
        execution.execution_id,
        token,
        AttemptStatus.CANCELLED,
        ExecutionStatus.CANCELLED,
        error=error,
    )


def snooze_detail(outcome: RunOutcome, attempt: int, until: datetime) -> dict[str, Any]:
    """What the snoozed attempt records (its ``error``, though it is no failure)."""
    assert outcome.snooze is not None
    detail: dict[str, Any] = {
        "kind": SNOOZED_KIND,
        "message": outcome.message or f"snoozed for {outcome.snooze:g} s",
        "seconds": outcome.snooze,
        "until": until.isoformat(),
        "attempt": attempt,
    }
    return detail


async def snooze(
    store: RunningStore,
    execution: Execution,
    outcome: RunOutcome,
    clock_now: datetime,
    store_now: datetime | None,
) -> bool:
    """RETRY_WAIT until ``outcome.snooze`` seconds from now, the attempt given back to the
    budget; False when the fencing token is stale (nothing written)."""
    assert outcome.snooze is not None and execution.fencing_token is not None
    until = clock_now + timedelta(seconds=outcome.snooze)
    return await store.execution_snooze(
        execution.execution_id,
        execution.fencing_token,
        until,
        snooze_detail(outcome, execution.attempt_count, until),
        store_now,
    )
