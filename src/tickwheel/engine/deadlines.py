"""The worker's guard for deadlines (docs/flow-control.md): an execution claimed too late does
not run.

The scheduler's sweep ends unstarted executions EXPIRED once their ``startBy`` (or ``deadline``)
has passed, but a claim can come between the instant and the sweep. So each claim of an
execution that has a limit is checked against the claim's own instant, which the claim wrote
with the database's clock (``started_at`` at its first start, ``updated_at`` at every claim):
no node's clock decides. Executions without a limit cost the worker one ``is None`` test."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from tickwheel.domain.models import Execution
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.store.flow_protocol import FlowStore
from tickwheel.store.protocol import AttemptResult


class TooLate(StrEnum):
    EXPIRED = "expired"
    """Its first start came after its startBy (or deadline): it ends EXPIRED, never run."""
    DEADLINE = "deadline"
    """A later attempt was claimed after the deadline: it ends FAILED, not run."""


def too_late(execution: Execution) -> TooLate | None:
    """``started_at`` is the first claim ever: when it came after a limit, the execution never
    started in time, whichever claim this is (a worker that died before expiring it leaves the
    next claim to do it). Otherwise only this claim's instant against the deadline counts."""
    claimed, first = execution.updated_at, execution.started_at
    start_by, deadline = execution.start_by, execution.deadline
    if first is not None and any(
        limit is not None and first > limit for limit in (start_by, deadline)
    ):
        return TooLate.EXPIRED
    if deadline is not None and claimed > deadline:
        return TooLate.DEADLINE
    return None


async def expire_claimed(store: FlowStore, execution: Execution, now: datetime | None) -> bool:
    """Ends a first claim after its startBy EXPIRED under its fencing token; False: stale."""
    assert execution.fencing_token is not None
    error = expired_error(execution)
    return await store.execution_expire_claimed(
        execution.execution_id, execution.fencing_token, error, now
    )


def expired_error(execution: Execution) -> dict[str, Any]:
    limit = "startBy" if execution.start_by is not None else "deadline"
    at = execution.start_by or execution.deadline
    assert at is not None
    return {
        "kind": "expired",
        "message": f"claimed at {_iso(execution.updated_at)}, after its {limit}: not run",
        limit: _iso(at),
    }


def deadline_result(execution: Execution) -> AttemptResult:
    """The FAILED result of an attempt claimed after the deadline (it is not run)."""
    assert execution.fencing_token is not None and execution.deadline is not None
    return AttemptResult(
        execution.execution_id,
        execution.fencing_token,
        AttemptStatus.FAILED,
        ExecutionStatus.FAILED,
        error={
            "kind": "deadline",
            "message": f"attempt {execution.attempt_count} was claimed at"
            f" {_iso(execution.updated_at)}, after the deadline: not run",
            "deadline": _iso(execution.deadline),
            "attempt": execution.attempt_count,
        },
    )


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")
