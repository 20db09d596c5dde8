"""THE state machine of Executions and Attempts (DESIGN.md). Stores guard every update with the
status it expects; this table decides which of those updates may exist at all."""

from __future__ import annotations

from enum import StrEnum

from tickwheel.domain.errors import InvalidTransition


class ExecutionStatus(StrEnum):
    SCHEDULED = "SCHEDULED"
    READY = "READY"
    RUNNING = "RUNNING"
    RETRY_WAIT = "RETRY_WAIT"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    EXPIRED = "EXPIRED"
    """Not started by its ``startBy`` (or its ``deadline``): it never ran (docs/flow-control.md)."""


class AttemptStatus(StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    ABANDONED = "ABANDONED"
    CANCELLED = "CANCELLED"


E = ExecutionStatus
A = AttemptStatus

EXECUTION_TRANSITIONS: dict[ExecutionStatus, frozenset[ExecutionStatus]] = {
    # The scheduler promotes; a cancel may win against it; the expiry sweep ends it EXPIRED when
    # its startBy (or deadline) passed before it ever started. A worker claims it as it is once
    # due in a shard its scheduler opened to the claims (docs/scaling.md, "Claiming a herd
    # without promoting it"); a cancel may win against that claim as against any.
    E.SCHEDULED: frozenset({E.READY, E.RUNNING, E.CANCELLED, E.EXPIRED}),
    # A worker claims; a cancel may win against the claim (conditional update decides).
    E.READY: frozenset({E.RUNNING, E.CANCELLED, E.EXPIRED}),
    # Outcome of an attempt. RUNNING -> READY is a release on graceful shutdown (no attempt burnt).
    # RUNNING -> CANCELLED happens when the handler honours a cooperative cancel signal.
    # RUNNING -> EXPIRED: claimed after its startBy (the claim raced the sweep); it is not run.
    E.RUNNING: frozenset({E.SUCCEEDED, E.RETRY_WAIT, E.FAILED, E.READY, E.CANCELLED, E.EXPIRED}),
    E.RETRY_WAIT: frozenset({E.READY, E.CANCELLED}),
    E.SUCCEEDED: frozenset(),
    # Replay brings a dead letter back with a fresh attempt budget.
    E.FAILED: frozenset({E.READY}),
    E.CANCELLED: frozenset(),
    E.EXPIRED: frozenset(),
}

ATTEMPT_TRANSITIONS: dict[AttemptStatus, frozenset[AttemptStatus]] = {
    A.RUNNING: frozenset({A.SUCCEEDED, A.FAILED, A.TIMED_OUT, A.ABANDONED, A.CANCELLED}),
    A.SUCCEEDED: frozenset(),
    A.FAILED: frozenset(),
    A.TIMED_OUT: frozenset(),
    A.ABANDONED: frozenset(),
    A.CANCELLED: frozenset(),
}

CANCELLABLE: frozenset[ExecutionStatus] = frozenset(
    s
    for s, targets in EXECUTION_TRANSITIONS.items()
    if E.CANCELLED in targets and s is not E.RUNNING
)
"""Statuses a user cancel moves straight to CANCELLED. RUNNING gets a cancel request instead: its
worker stops the attempt at its next heartbeat and finishes it CANCELLED (under its fencing
token, like any other outcome)."""

TERMINAL: frozenset[ExecutionStatus] = frozenset({E.SUCCEEDED, E.FAILED, E.CANCELLED, E.EXPIRED})
REPLAYABLE: frozenset[ExecutionStatus] = frozenset({E.FAILED})


def can_transition(current: ExecutionStatus, target: ExecutionStatus) -> bool:
    return target in EXECUTION_TRANSITIONS[current]


def can_transition_attempt(current: AttemptStatus, target: AttemptStatus) -> bool:
    return target in ATTEMPT_TRANSITIONS[current]


def require_transition(current: ExecutionStatus, target: ExecutionStatus) -> None:
    if not can_transition(current, target):
        raise InvalidTransition(
            f"an execution cannot go from {current} to {target}",
            {"status": str(current), "target": str(target)},
        )


def require_attempt_transition(current: AttemptStatus, target: AttemptStatus) -> None:
    if not can_transition_attempt(current, target):
        raise InvalidTransition(
            f"an attempt cannot go from {current} to {target}",
            {"status": str(current), "target": str(target)},
        )


def cancel_refusal(current: ExecutionStatus) -> str:
    """Why a cancel of an execution in ``current`` is refused, in words a person understands."""
    if current in TERMINAL:
        return f"the execution has already finished ({current}) and can no longer be cancelled"
    return f"an execution in {current} cannot be cancelled"


def replay_refusal(current: ExecutionStatus) -> str:
    return f"only a FAILED execution (a dead letter) can be replayed; this one is {current}"
