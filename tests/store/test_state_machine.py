"""The state machine, executed: every store method that changes an execution's status is called
from every status, on both backends, and must move the row exactly when ``domain/states.py``
allows the edge it performs. A refused call changes nothing: not the status, not the fencing
token, not the attempt rows.

``TRANSITIONS`` lists what each method is meant to perform. A method may do less than the table
allows (a user cancel leaves RUNNING alone), never more; and every edge of the table is performed
by some method. A new status, edge or status-writing query therefore fails here until listed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import timedelta

import pytest

from tests.factories import T0, new_execution
from tickwheel.domain.errors import InvalidTransition
from tickwheel.domain.models import Attempt, Execution
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.domain.states import (
    ATTEMPT_TRANSITIONS,
    EXECUTION_TRANSITIONS,
    AttemptStatus,
    ExecutionStatus,
)
from tickwheel.store.protocol import AttemptResult, Store

S = ExecutionStatus
A = AttemptStatus
LEASE = timedelta(seconds=30)
LATER = T0 + timedelta(hours=1)
"""When the transitions are tried: everything set up is due, and every lease has run out."""
ALL_SHARDS = range(SHARD_COUNT)
TENANT = "acme"

Call = Callable[[Store, Execution, S, int], Awaitable[object]]
"""(store, execution, target status, fencing token) -> the method's answer."""


def _finish_attempt(target: S) -> A:
    """The attempt status a worker reports beside the execution status ``target``."""
    return {
        S.SUCCEEDED: A.SUCCEEDED,
        S.CANCELLED: A.CANCELLED,
        S.READY: A.ABANDONED,
    }.get(target, A.FAILED)


def _reap_attempt(target: S) -> A:
    return A.TIMED_OUT if target is S.FAILED else A.ABANDONED


def _result(
    ex: Execution, target: S, token: int, attempt: A, *, lease_expired_only: bool = False
) -> AttemptResult:
    return AttemptResult(
        ex.execution_id,
        token,
        attempt,
        target,
        error=None if target is S.SUCCEEDED else {"kind": "error", "message": "boom"},
        next_attempt_at=LATER + LEASE if target is S.RETRY_WAIT else None,
        lease_expired_only=lease_expired_only,
    )


async def _promote_due(store: Store, ex: Execution, target: S, token: int) -> object:
    return await store.execution_promote_due(ALL_SHARDS, 100, LATER)


async def _promote_ids(store: Store, ex: Execution, target: S, token: int) -> object:
    return await store.execution_promote_ids([ex.execution_id], ALL_SHARDS, LATER)


async def _promote_due_leased(store: Store, ex: Execution, target: S, token: int) -> object:
    leases = await store.shard_lease_acquire("scheduler", SHARD_COUNT, LEASE, LATER)
    return await store.execution_promote_due_leased("scheduler", leases, 100, LATER)


async def _promote_ids_leased(store: Store, ex: Execution, target: S, token: int) -> object:
    leases = await store.shard_lease_acquire("scheduler", SHARD_COUNT, LEASE, LATER)
    return await store.execution_promote_ids_leased("scheduler", leases, [ex.execution_id], LATER)


async def _claim(store: Store, ex: Execution, target: S, token: int) -> object:
    return await store.execution_claim_ready("w2", 10, LEASE, LATER)


async def _claim_open(store: Store, ex: Execution, target: S, token: int) -> object:
    """A claim after the scheduler opened every shard to the claims through LATER: a SCHEDULED
    row due by then is claimed as it is."""
    leases = await store.shard_lease_acquire("scheduler", SHARD_COUNT, LEASE, LATER)
    assert await store.shard_lease_open("scheduler", leases, LATER, LATER)
    return await store.execution_claim_ready("w2", 10, LEASE, LATER)


async def _finish(store: Store, ex: Execution, target: S, token: int) -> object:
    return await store.attempt_finish(_result(ex, target, token, _finish_attempt(target)), LATER)


async def _finish_many(store: Store, ex: Execution, target: S, token: int) -> object:
    result = _result(ex, target, token, _finish_attempt(target))
    return await store.attempt_finish_many([result], LATER)


async def _reap(store: Store, ex: Execution, target: S, token: int) -> object:
    result = _result(ex, target, token, _reap_attempt(target), lease_expired_only=True)
    return await store.execution_reap([result], LATER)


async def _release(store: Store, ex: Execution, target: S, token: int) -> object:
    return await store.execution_release(ex.execution_id, token, LATER)


async def _snooze(store: Store, ex: Execution, target: S, token: int) -> object:
    detail = {"kind": "snoozed", "message": "later"}
    return await store.execution_snooze(ex.execution_id, token, LATER + LEASE, detail, LATER)


async def _cancel(store: Store, ex: Execution, target: S, token: int) -> object:
    return await store.execution_cancel(TENANT, ex.execution_id, LATER)


async def _cancel_unstarted(store: Store, ex: Execution, target: S, token: int) -> object:
    return await store.execution_cancel_unstarted(TENANT, ex.execution_id, LATER)


async def _replay(store: Store, ex: Execution, target: S, token: int) -> object:
    return await store.execution_replay(TENANT, ex.execution_id, 3, LATER)


async def _expire_due(store: Store, ex: Execution, target: S, token: int) -> object:
    return await store.execution_expire_due(LATER)


async def _expire_claimed(store: Store, ex: Execution, target: S, token: int) -> object:
    error = {"kind": "expired", "message": "claimed after its startBy"}
    return await store.execution_expire_claimed(ex.execution_id, token, error, LATER)


@dataclass(frozen=True)
class Transition:
    """A store method that changes an execution's status: the edges it is meant to perform, the
    targets it is tried with (a fixed one, or every status when the caller names it) and the
    status it gives the attempt it ends (None: it ends none)."""

    method: str
    performs: frozenset[tuple[S, S]]
    call: Call
    attempt: Callable[[S], A] | None = None
    fenced: bool = False
    """Guarded by the fencing token as well: a stale token is refused from RUNNING too."""

    @property
    def targets(self) -> list[S]:
        fixed = {target for _, target in self.performs}
        return sorted(fixed) if len(fixed) == 1 else list(S)


def _edges(sources: set[S], target: S) -> frozenset[tuple[S, S]]:
    return frozenset((source, target) for source in sources)


OUTCOMES = frozenset((S.RUNNING, target) for target in EXECUTION_TRANSITIONS[S.RUNNING])
"""A finished attempt: the worker names the execution's next status, the table decides. (The
worker ends a claim too late for its startBy through execution_expire_claimed, which also
records the history event, rather than through a result.)"""

TRANSITIONS = [
    Transition("execution_promote_due", _edges({S.SCHEDULED, S.RETRY_WAIT}, S.READY), _promote_due),
    Transition("execution_promote_ids", _edges({S.SCHEDULED}, S.READY), _promote_ids),
    Transition(
        "execution_promote_due_leased",
        _edges({S.SCHEDULED, S.RETRY_WAIT}, S.READY),
        _promote_due_leased,
    ),
    Transition("execution_promote_ids_leased", _edges({S.SCHEDULED}, S.READY), _promote_ids_leased),
    Transition("execution_claim_ready", _edges({S.READY}, S.RUNNING), _claim),
    Transition("execution_claim_ready", _edges({S.READY, S.SCHEDULED}, S.RUNNING), _claim_open),
    Transition("attempt_finish", OUTCOMES, _finish, _finish_attempt, fenced=True),
    Transition("attempt_finish_many", OUTCOMES, _finish_many, _finish_attempt, fenced=True),
    Transition("execution_reap", OUTCOMES, _reap, _reap_attempt, fenced=True),
    Transition(
        "execution_release",
        _edges({S.RUNNING}, S.READY),
        _release,
        lambda _: A.ABANDONED,
        fenced=True,
    ),
    Transition(
        "execution_snooze",
        _edges({S.RUNNING}, S.RETRY_WAIT),
        _snooze,
        lambda _: A.ABANDONED,
        fenced=True,
    ),
    Transition(
        "execution_cancel", _edges({S.SCHEDULED, S.READY, S.RETRY_WAIT}, S.CANCELLED), _cancel
    ),
    Transition(
        "execution_cancel_unstarted", _edges({S.SCHEDULED, S.READY}, S.CANCELLED), _cancel_unstarted
    ),
    Transition("execution_replay", _edges({S.FAILED}, S.READY), _replay),
    Transition("execution_expire_due", _edges({S.SCHEDULED, S.READY}, S.EXPIRED), _expire_due),
    Transition(
        "execution_expire_claimed",
        _edges({S.RUNNING}, S.EXPIRED),
        _expire_claimed,
        lambda _: A.ABANDONED,
        fenced=True,
    ),
]


async def put_in(store: Store, status: S) -> Execution:
    """One execution in ``status``, brought there through the store as in production."""
    item = new_execution(TENANT, execute_in=60 if status is S.SCHEDULED else None)
    # A startBy that has passed by LATER, when the transitions are tried: the expiry applies.
    item = replace(item, start_by=T0 + timedelta(minutes=30))
    await store.execution_insert_many([item])
    if status is S.CANCELLED:
        assert await store.execution_cancel(TENANT, item.execution_id, T0) is not None
    elif status not in (S.SCHEDULED, S.READY):
        [claimed] = await store.execution_claim_ready("w1", 1, LEASE, T0)
        assert claimed.fencing_token is not None
        if status is not S.RUNNING:
            attempt = A.SUCCEEDED if status is S.SUCCEEDED else A.FAILED
            result = AttemptResult(
                item.execution_id,
                claimed.fencing_token,
                attempt,
                status,
                error=None if status is S.SUCCEEDED else {"kind": "error", "message": "boom"},
                next_attempt_at=T0 + timedelta(seconds=60) if status is S.RETRY_WAIT else None,
            )
            assert await store.attempt_finish(result, T0 + timedelta(seconds=1))
    got = await store.execution_get(TENANT, item.execution_id)
    assert got is not None and got.status is status
    return got


async def snapshot(store: Store, ex: Execution) -> tuple[Execution | None, list[Attempt]]:
    return (
        await store.execution_get(TENANT, ex.execution_id),
        await store.attempt_list(TENANT, ex.execution_id),
    )


CASES = [
    pytest.param(t, source, target, False, id=f"{t.method}-{source}-to-{target}")
    for t in TRANSITIONS
    for source in S
    for target in t.targets
] + [
    pytest.param(t, source, target, True, id=f"{t.method}-{source}-to-{target}-stale-token")
    for t in TRANSITIONS
    if t.fenced
    for source, target in sorted(t.performs)
]


@pytest.mark.parametrize(("transition", "source", "target", "stale"), CASES)
async def test_a_store_transition_moves_the_row_exactly_when_it_is_meant_to(
    store: Store, transition: Transition, source: S, target: S, stale: bool
) -> None:
    ex = await put_in(store, source)
    token = (ex.fencing_token or 1) - (1 if stale else 0)
    before = await snapshot(store, ex)
    expected = (source, target) in transition.performs and not stale
    try:
        await transition.call(store, ex, target, token)
    except InvalidTransition:
        assert not expected, f"{transition.method} refused {source} -> {target} by raising"
    after = await snapshot(store, ex)
    if not expected:
        assert after == before, f"{transition.method} changed an execution in {source}"
        return
    moved, attempts = after
    assert moved is not None and moved.status is target
    if target is S.RUNNING:  # a claim: a new attempt under a new, greater token
        assert moved.fencing_token is not None and moved.fencing_token > (ex.fencing_token or 0)
        assert attempts[-1].status is A.RUNNING
        assert attempts[-1].fencing_token == moved.fencing_token
        assert len(attempts) == len(before[1]) + 1
    else:
        assert moved.fencing_token == ex.fencing_token
        assert len(attempts) == len(before[1])
    if transition.attempt is not None:
        assert attempts[-1].status is transition.attempt(target)
    elif target is not S.RUNNING:
        assert attempts == before[1], f"{transition.method} touched the attempts"


def test_no_method_performs_an_edge_the_table_forbids() -> None:
    table = {(s, t) for s, targets in EXECUTION_TRANSITIONS.items() for t in targets}
    for transition in TRANSITIONS:
        assert transition.performs <= table, (transition.method, transition.performs - table)


def test_every_edge_of_the_table_is_performed_by_some_method() -> None:
    table = {(s, t) for s, targets in EXECUTION_TRANSITIONS.items() for t in targets}
    performed = set().union(*(t.performs for t in TRANSITIONS))
    assert table - performed == set()
    assert set(EXECUTION_TRANSITIONS) == set(S)  # every status has its row in the table


FINISHERS = [t for t in TRANSITIONS if t.method in ("attempt_finish", "execution_reap")]


@pytest.mark.parametrize("transition", FINISHERS, ids=lambda t: t.method)
@pytest.mark.parametrize("attempt", list(A))
async def test_an_attempt_ends_only_in_a_status_its_table_allows(
    store: Store, transition: Transition, attempt: A
) -> None:
    ex = await put_in(store, S.RUNNING)
    assert ex.fencing_token is not None
    before = await snapshot(store, ex)
    allowed = attempt in ATTEMPT_TRANSITIONS[A.RUNNING]
    try:
        result = _result(ex, S.FAILED, ex.fencing_token, attempt, lease_expired_only=True)
    except InvalidTransition:
        assert not allowed
        assert await snapshot(store, ex) == before
        return
    assert allowed
    if transition.method == "attempt_finish":
        assert await store.attempt_finish(result, LATER)
    else:
        assert await store.execution_reap([result], LATER) == [ex.execution_id]
    _, attempts = await snapshot(store, ex)
    assert [a.status for a in attempts] == [attempt]


def test_every_attempt_status_has_its_row_in_the_table() -> None:
    assert set(ATTEMPT_TRANSITIONS) == set(A)
    ended = set().union(*ATTEMPT_TRANSITIONS.values())
    assert ended == set(A) - {A.RUNNING}  # every end is reachable, and only from RUNNING
