"""Backoff bounds and retry decisions, exact thanks to an injected random source."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.factories import T0
from tickwheel.domain.backoff import backoff_cap, backoff_delay
from tickwheel.domain.definitions import RetryPolicy
from tickwheel.domain.retry import FailureDecision, decide_failure, decide_lost
from tickwheel.domain.states import AttemptStatus, ExecutionStatus

POLICY = RetryPolicy(max_attempts=5, base_delay=2.0, max_delay=60.0)


def top(low: float, high: float) -> float:
    """A random source that always draws the upper bound, so the cap is what we see."""
    return high


@pytest.mark.parametrize(
    ("attempt", "cap"), [(1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0), (5, 32.0), (6, 60.0), (50, 60.0)]
)
def test_cap_doubles_until_max_delay(attempt: int, cap: float) -> None:
    assert backoff_cap(attempt, 2.0, 60.0) == cap
    assert backoff_delay(attempt, 2.0, 60.0, top) == timedelta(seconds=cap)


def test_full_jitter_draws_between_zero_and_the_cap() -> None:
    seen: list[tuple[float, float]] = []

    def record(low: float, high: float) -> float:
        seen.append((low, high))
        return (low + high) / 2

    assert backoff_delay(3, 2.0, 60.0, record) == timedelta(seconds=4)
    assert seen == [(0.0, 8.0)]


def test_attempt_numbers_start_at_one() -> None:
    with pytest.raises(ValueError):
        backoff_cap(0, 1.0, 10.0)


@given(st.integers(1, 10_000), st.floats(0.001, 100), st.floats(0.001, 10_000))
def test_cap_never_exceeds_max_delay(attempt: int, base: float, extra: float) -> None:
    assert 0 < backoff_cap(attempt, base, base + extra) <= base + extra


def test_retryable_failure_with_attempts_left_waits() -> None:
    d = decide_failure("error", 2, 5, POLICY, T0, top)
    assert d == (
        type(d)(AttemptStatus.FAILED, ExecutionStatus.RETRY_WAIT, T0 + timedelta(seconds=4))
    )


@pytest.mark.parametrize(
    ("kind", "attempt_status"),
    [("timeout", AttemptStatus.TIMED_OUT), ("lost", AttemptStatus.ABANDONED)],
)
def test_timeouts_and_lost_workers_mark_the_attempt(
    kind: str, attempt_status: AttemptStatus
) -> None:
    d = decide_failure(kind, 1, 5, POLICY, T0, top)
    assert d.attempt_status is attempt_status
    assert d.execution_status is ExecutionStatus.RETRY_WAIT


def test_exhausted_attempts_are_a_dead_letter() -> None:
    d = decide_failure("error", 5, 5, POLICY, T0, top)
    assert (d.execution_status, d.next_attempt_at) == (ExecutionStatus.FAILED, None)


@pytest.mark.parametrize("kind", ["permanent", "invalid_output", "client_error", "missing_runtime"])
def test_permanent_kinds_never_retry(kind: str) -> None:
    assert decide_failure(kind, 1, 5, POLICY, T0, top).execution_status is ExecutionStatus.FAILED


def test_retry_on_limits_which_kinds_retry() -> None:
    only_timeouts = RetryPolicy(max_attempts=5, retry_on=frozenset({"timeout"}))
    assert decide_failure("error", 1, 5, only_timeouts, T0, top).execution_status is (
        ExecutionStatus.FAILED
    )
    assert decide_failure("timeout", 1, 5, only_timeouts, T0, top).execution_status is (
        ExecutionStatus.RETRY_WAIT
    )


def test_a_replayed_dead_letter_backs_off_from_the_start_again() -> None:
    # 5 attempts used, replay granted 5 more (max 10): the 6th attempt is the new budget's 1st.
    d = decide_failure("error", 6, 10, POLICY, T0, top)
    assert d.next_attempt_at == T0 + timedelta(seconds=2)


# -- attempts lost to a worker's death: counted apart, with a cap of their own ---------------------


def test_a_lost_attempt_is_retried_whatever_max_attempts_says() -> None:
    policy = RetryPolicy(max_attempts=1, base_delay=2.0, max_delay=60.0, max_lost_attempts=3)
    first = decide_lost(1, policy, T0, top)
    assert first == FailureDecision(
        AttemptStatus.ABANDONED, ExecutionStatus.RETRY_WAIT, T0 + timedelta(seconds=2)
    )
    # The backoff grows with the losses, as with failures.
    assert decide_lost(2, policy, T0, top).next_attempt_at == T0 + timedelta(seconds=4)


def test_the_lost_attempt_at_the_cap_dead_letters_and_says_why() -> None:
    policy = RetryPolicy(max_attempts=10, max_lost_attempts=3)
    decision = decide_lost(3, policy, T0, top)
    assert decision.execution_status is ExecutionStatus.FAILED
    assert decision.attempt_status is AttemptStatus.ABANDONED
    assert decision.next_attempt_at is None
    assert "3 attempts were lost to worker deaths" in decision.reason
    assert "retry.maxLostAttempts (3)" in decision.reason
    assert RetryPolicy().max_lost_attempts == 5


def test_a_policy_that_does_not_retry_lost_attempts_dead_letters_the_first() -> None:
    policy = RetryPolicy(max_attempts=5, retry_on=frozenset({"error"}))
    decision = decide_lost(1, policy, T0, top)
    assert decision.execution_status is ExecutionStatus.FAILED and decision.reason == ""
