"""What a failed attempt leads to: another attempt later, or the dead letter. Pure, so the worker
and the reaper decide the same way and tests can check every branch with an exact random source.

Two budgets. A failure the handler reported (an exception, a timeout, a bad exit code) counts
against ``maxAttempts``. An attempt *lost* to its worker's death (the lease ran out: the process
was killed, crashed, froze) is counted apart, against ``maxLostAttempts``: whatever killed the
worker, most often a neighbouring handler, says nothing about this execution, so it gets its
attempt back. The cap of their own still ends a job that kills every worker it runs on."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime

from tickwheel.domain.backoff import Uniform, backoff_delay
from tickwheel.domain.definitions import RetryPolicy, is_retryable
from tickwheel.domain.states import AttemptStatus, ExecutionStatus


@dataclass(frozen=True)
class FailureDecision:
    attempt_status: AttemptStatus
    execution_status: ExecutionStatus
    next_attempt_at: datetime | None
    reason: str = ""
    """Why the execution ends here, when the attempts' own errors do not say it (lost attempts)."""


def attempt_status_for(kind: str) -> AttemptStatus:
    if kind == "timeout":
        return AttemptStatus.TIMED_OUT
    if kind == "lost":
        return AttemptStatus.ABANDONED
    return AttemptStatus.FAILED


def decide_failure(
    kind: str,
    attempt_count: int,
    max_attempts: int,
    policy: RetryPolicy,
    now: datetime,
    uniform: Uniform = random.uniform,
) -> FailureDecision:
    """``attempt_count`` counts the attempt that just failed. The backoff exponent counts only
    the attempts of the current budget, so a replayed dead letter starts again from a short
    delay instead of inheriting the long one it died with."""
    status = attempt_status_for(kind)
    if not is_retryable(policy, kind) or attempt_count >= max_attempts:
        return FailureDecision(status, ExecutionStatus.FAILED, None)
    earlier_budgets = max(0, max_attempts - policy.max_attempts)
    n = max(1, attempt_count - earlier_budgets)
    delay = backoff_delay(n, policy.base_delay, policy.max_delay, uniform)
    return FailureDecision(status, ExecutionStatus.RETRY_WAIT, now + delay)


def decide_lost(
    lost_count: int,
    policy: RetryPolicy,
    now: datetime,
    uniform: Uniform = random.uniform,
) -> FailureDecision:
    """An attempt lost to its worker's death. ``lost_count`` counts this one too (attempts of
    the execution lost so far, since it was last replayed). Under the cap the execution waits a
    backoff by that count and tries again without spending ``maxAttempts`` (the store gives the
    attempt back); at the cap it is dead-lettered, saying why."""
    if not is_retryable(policy, "lost"):
        return FailureDecision(AttemptStatus.ABANDONED, ExecutionStatus.FAILED, None)
    if lost_count >= policy.max_lost_attempts:
        reason = (
            f"{lost_count} attempts were lost to worker deaths (leases that ran out), the cap of"
            f" retry.maxLostAttempts ({policy.max_lost_attempts}): a handler that kills or"
            " freezes its worker every time looks like this"
        )
        return FailureDecision(AttemptStatus.ABANDONED, ExecutionStatus.FAILED, None, reason)
    delay = backoff_delay(max(1, lost_count), policy.base_delay, policy.max_delay, uniform)
    return FailureDecision(AttemptStatus.ABANDONED, ExecutionStatus.RETRY_WAIT, now + delay)


def within_deadline(decision: FailureDecision, deadline: datetime | None) -> FailureDecision:
    """No attempt starts after the execution's ``deadline``: a retry that would is not made, and
    the execution is dead-lettered (FAILED, replayable) saying why. Unchanged without one."""
    at = decision.next_attempt_at
    if deadline is None or at is None or at <= deadline:
        return decision
    reason = (
        f"no retry: its next attempt ({at.isoformat()}) would start after the deadline"
        f" ({deadline.isoformat()})"
    )
    return FailureDecision(decision.attempt_status, ExecutionStatus.FAILED, None, reason)
