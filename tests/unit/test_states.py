"""THE state machine (domain/states.py), checked against a table spelled out here from DESIGN.md,
independently of the module's own table: every (from, to) pair of every status, both machines."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.domain.errors import Conflict, InvalidTransition
from tickwheel.domain.states import (
    ATTEMPT_TRANSITIONS,
    CANCELLABLE,
    EXECUTION_TRANSITIONS,
    REPLAYABLE,
    TERMINAL,
    AttemptStatus,
    ExecutionStatus,
    can_transition,
    can_transition_attempt,
    cancel_refusal,
    replay_refusal,
    require_transition,
)

E = ExecutionStatus
A = AttemptStatus

# DESIGN.md, written out pair by pair. Nothing here is derived from EXECUTION_TRANSITIONS.
EXPECTED_EXECUTION: frozenset[tuple[ExecutionStatus, ExecutionStatus]] = frozenset(
    {
        (E.SCHEDULED, E.READY),  # the scheduler promotes
        (E.SCHEDULED, E.RUNNING),  # claimed as it is, due in a shard opened to the claims
        (E.SCHEDULED, E.CANCELLED),
        (E.READY, E.RUNNING),  # a worker claims
        (E.READY, E.CANCELLED),
        (E.RUNNING, E.SUCCEEDED),
        (E.RUNNING, E.RETRY_WAIT),
        (E.RUNNING, E.FAILED),
        (E.RUNNING, E.READY),  # release on graceful shutdown
        (E.RUNNING, E.CANCELLED),  # cooperative cancel honoured by the handler
        (E.RETRY_WAIT, E.READY),
        (E.RETRY_WAIT, E.CANCELLED),
        (E.FAILED, E.READY),  # replay of a dead letter
        (E.SCHEDULED, E.EXPIRED),  # not started by its startBy (or deadline): the sweep
        (E.READY, E.EXPIRED),
        (E.RUNNING, E.EXPIRED),  # claimed after its startBy: its worker does not run it
    }
)

EXPECTED_ATTEMPT: frozenset[tuple[AttemptStatus, AttemptStatus]] = frozenset(
    {
        (A.RUNNING, A.SUCCEEDED),
        (A.RUNNING, A.FAILED),
        (A.RUNNING, A.TIMED_OUT),
        (A.RUNNING, A.ABANDONED),
        (A.RUNNING, A.CANCELLED),
    }
)

ALL_EXECUTION_PAIRS = list(itertools.product(ExecutionStatus, ExecutionStatus))
ALL_ATTEMPT_PAIRS = list(itertools.product(AttemptStatus, AttemptStatus))


def _pair_id(
    pair: tuple[ExecutionStatus, ExecutionStatus] | tuple[AttemptStatus, AttemptStatus],
) -> str:
    return f"{pair[0]}->{pair[1]}"


def test_the_status_sets_are_the_designed_ones() -> None:
    assert {s.value for s in ExecutionStatus} == {
        "SCHEDULED",
        "READY",
        "RUNNING",
        "RETRY_WAIT",
        "SUCCEEDED",
        "FAILED",
        "CANCELLED",
        "EXPIRED",
    }
    assert {s.value for s in AttemptStatus} == {
        "RUNNING",
        "SUCCEEDED",
        "FAILED",
        "TIMED_OUT",
        "ABANDONED",
        "CANCELLED",
    }


def test_every_status_has_a_row_in_the_tables() -> None:
    assert set(EXECUTION_TRANSITIONS) == set(ExecutionStatus)
    assert set(ATTEMPT_TRANSITIONS) == set(AttemptStatus)


@pytest.mark.parametrize("pair", ALL_EXECUTION_PAIRS, ids=_pair_id)
def test_execution_transition(pair: tuple[ExecutionStatus, ExecutionStatus]) -> None:
    current, target = pair
    if pair in EXPECTED_EXECUTION:
        assert can_transition(current, target) is True
        require_transition(current, target)  # does not raise
    else:
        assert can_transition(current, target) is False
        with pytest.raises(InvalidTransition) as info:
            require_transition(current, target)
        assert isinstance(info.value, Conflict)
        assert info.value.code == "invalid_transition"
        assert str(current) in info.value.message
        assert str(target) in info.value.message
        assert info.value.details == {"status": str(current), "target": str(target)}


@pytest.mark.parametrize("pair", ALL_ATTEMPT_PAIRS, ids=_pair_id)
def test_attempt_transition(pair: tuple[AttemptStatus, AttemptStatus]) -> None:
    current, target = pair
    assert can_transition_attempt(current, target) is (pair in EXPECTED_ATTEMPT)


def test_no_self_transitions() -> None:
    assert not any(can_transition(s, s) for s in ExecutionStatus)
    assert not any(can_transition_attempt(s, s) for s in AttemptStatus)


def test_the_allowed_sets_match_exactly() -> None:
    """The same check the other way round: the module allows nothing beyond the design."""
    allowed = {p for p in ALL_EXECUTION_PAIRS if can_transition(*p)}
    assert allowed == EXPECTED_EXECUTION
    allowed_attempt = {p for p in ALL_ATTEMPT_PAIRS if can_transition_attempt(*p)}
    assert allowed_attempt == EXPECTED_ATTEMPT


def test_cancellable_statuses() -> None:
    assert frozenset({E.SCHEDULED, E.READY, E.RETRY_WAIT}) == CANCELLABLE
    # RUNNING may reach CANCELLED, but only cooperatively: a user cancel does not move it.
    assert E.RUNNING not in CANCELLABLE
    for status in CANCELLABLE:
        assert can_transition(status, E.CANCELLED)


def test_terminal_and_replayable() -> None:
    assert frozenset({E.SUCCEEDED, E.FAILED, E.CANCELLED, E.EXPIRED}) == TERMINAL
    assert frozenset({E.FAILED}) == REPLAYABLE
    # SUCCEEDED, CANCELLED and EXPIRED are final; FAILED is final except for a replay.
    for status in (E.SUCCEEDED, E.CANCELLED, E.EXPIRED):
        assert not any(can_transition(status, t) for t in ExecutionStatus)
    assert [t for t in ExecutionStatus if can_transition(E.FAILED, t)] == [E.READY]
    assert TERMINAL.isdisjoint(CANCELLABLE)


@pytest.mark.parametrize("status", list(ExecutionStatus), ids=str)
def test_cancel_refusal_names_the_status(status: ExecutionStatus) -> None:
    message = cancel_refusal(status)
    assert str(status) in message
    assert "cancel" in message


def test_cancel_refusal_of_finished() -> None:
    # RUNNING is not refused: a cancel asks its worker to stop it (RUNNING -> CANCELLED).
    assert can_transition(E.RUNNING, E.CANCELLED) and E.RUNNING not in CANCELLABLE
    for status in TERMINAL:
        assert "finished" in cancel_refusal(status)


@pytest.mark.parametrize("status", list(ExecutionStatus), ids=str)
def test_replay_refusal_names_the_status(status: ExecutionStatus) -> None:
    message = replay_refusal(status)
    assert message.endswith(str(status))
    assert "FAILED" in message
    assert "replay" in message


_REPLAY = (E.FAILED, E.READY)


@settings(max_examples=300, deadline=None)
@given(
    start=st.sampled_from(list(ExecutionStatus)),
    choices=st.lists(st.integers(0, 1_000), max_size=40),
    allow_replay=st.booleans(),
)
def test_random_walks_never_leave_a_terminal_state(
    start: ExecutionStatus, choices: list[int], allow_replay: bool
) -> None:
    """Walk the table by allowed steps only. The one way out of a terminal state is the explicit
    replay of a dead letter (FAILED -> READY); without it, a walk that reaches a terminal state
    ends there. SUCCEEDED and CANCELLED have no way out at all."""
    status = start
    for choice in choices:
        targets = sorted(
            t
            for t in ExecutionStatus
            if can_transition(status, t) and (allow_replay or (status, t) != _REPLAY)
        )
        if not targets:
            assert status in TERMINAL, f"{status} is a dead end but not terminal"
            break
        target = targets[choice % len(targets)]
        if status in TERMINAL:
            assert (status, target) == _REPLAY
        status = target
    if not allow_replay and start in TERMINAL:
        assert status == start


@settings(max_examples=200, deadline=None)
@given(
    start=st.sampled_from(list(AttemptStatus)), choices=st.lists(st.integers(0, 1_000), max_size=20)
)
def test_random_attempt_walks_end_after_one_step(start: AttemptStatus, choices: list[int]) -> None:
    status = start
    steps = 0
    for choice in choices:
        targets = sorted(t for t in AttemptStatus if can_transition_attempt(status, t))
        if not targets:
            break
        status = targets[choice % len(targets)]
        steps += 1
    assert steps <= 1
    if steps == 1:
        assert status is not A.RUNNING
