"""What a failed attempt leads to: another attempt later, or the dead letter. Pure, so the worker
and the reaper decide the same way and tests can check every branch with an exact random source."""

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
