"""A worker's batch of finished attempts: one call, one transaction, each result fenced on its
own, and everything a single finish writes (attempt row, status, output, outbox row)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from tests.factories import T0, new_execution
from tickwheel.domain.models import Execution
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.store.factory import workflow_store_for
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.protocol import AttemptResult, Store

LEASE = timedelta(seconds=30)
DONE_AT = T0 + timedelta(seconds=3)


async def _claim(store: Store, keys: list[str | None]) -> list[Execution]:
    items = [
        new_execution(key=key, now=T0 + timedelta(milliseconds=n)) for n, key in enumerate(keys)
    ]
    await store.execution_insert_many(items)
    claimed = await store.execution_claim_ready("w1", len(items), LEASE, T0)
    # Claim order is readiness order here, so the claims line up with the keys.
    assert [e.execution_id for e in claimed] == [i.execution_id for i in items]
    return claimed


def _token(execution: Execution) -> int:
    assert execution.fencing_token is not None
    return execution.fencing_token


async def _get(store: Store, execution: Execution) -> Execution:
    got = await store.execution_get("acme", execution.execution_id)
    assert got is not None
    return got


async def test_a_mixed_batch_commits_each_outcome_and_drops_the_stale_one(store: Store) -> None:
    run_id = uuid.uuid4()
    ok, retry, dead, stale, big = await _claim(
        store, [f"wf:{run_id}:extract", None, f"wf:{run_id}:clean", None, None]
    )
    retry_at = T0 + timedelta(seconds=7)
    reference = f"tickwheel://executions/{big.execution_id}/output"
    results = [
        AttemptResult(
            ok.execution_id,
            _token(ok),
            AttemptStatus.SUCCEEDED,
            ExecutionStatus.SUCCEEDED,
            output={"rows": 3},
            output_size=10,
        ),
        AttemptResult(
            retry.execution_id,
            _token(retry),
            AttemptStatus.FAILED,
            ExecutionStatus.RETRY_WAIT,
            error={"kind": "error", "message": "try again", "attempt": 1},
            next_attempt_at=retry_at,
        ),
        AttemptResult(
            dead.execution_id,
            _token(dead),
            AttemptStatus.FAILED,
            ExecutionStatus.FAILED,
            error={"kind": "permanent", "message": "no", "attempt": 1},
        ),
        AttemptResult(  # a zombie: its token is not the current one
            stale.execution_id,
            _token(stale) - 1,
            AttemptStatus.SUCCEEDED,
            ExecutionStatus.SUCCEEDED,
            output={"zombie": True},
        ),
        AttemptResult(
            big.execution_id,
            _token(big),
            AttemptStatus.SUCCEEDED,
            ExecutionStatus.SUCCEEDED,
            output={"blob": "x" * 100},
            output_reference=reference,
            output_size=112,
        ),
    ]
    assert await store.attempt_finish_many(results, DONE_AT) == [True, True, True, False, True]

    got_ok = await _get(store, ok)
    assert (got_ok.status, got_ok.output, got_ok.finished_at) == (
        ExecutionStatus.SUCCEEDED,
        {"rows": 3},
        DONE_AT,
    )
    assert got_ok.lease_owner is None and got_ok.lease_expires_at is None
    got_retry = await _get(store, retry)
    assert got_retry.status is ExecutionStatus.RETRY_WAIT
    assert got_retry.next_attempt_at == retry_at and got_retry.finished_at is None
    assert got_retry.error == {"kind": "error", "message": "try again", "attempt": 1}
    got_dead = await _get(store, dead)
    assert (got_dead.status, got_dead.finished_at) == (ExecutionStatus.FAILED, DONE_AT)
    got_stale = await _get(store, stale)
    assert (got_stale.status, got_stale.output) == (ExecutionStatus.RUNNING, None)
    got_big = await _get(store, big)
    assert (got_big.status, got_big.output) == (ExecutionStatus.SUCCEEDED, None)
    assert got_big.output_reference == reference
    assert await store.execution_output_get("acme", big.execution_id) == {"blob": "x" * 100}

    attempts = {
        e.execution_id: await store.attempt_list("acme", e.execution_id)
        for e in (ok, retry, dead, stale, big)
    }
    assert [(a.status, a.finished_at) for a in attempts[ok.execution_id]] == [
        (AttemptStatus.SUCCEEDED, DONE_AT)
    ]
    [retry_attempt] = attempts[retry.execution_id]
    assert retry_attempt.status is AttemptStatus.FAILED
    assert retry_attempt.error == {"kind": "error", "message": "try again", "attempt": 1}
    assert [a.status for a in attempts[dead.execution_id]] == [AttemptStatus.FAILED]
    assert [(a.status, a.finished_at) for a in attempts[stale.execution_id]] == [
        (AttemptStatus.RUNNING, None)
    ]
    assert [a.status for a in attempts[big.execution_id]] == [AttemptStatus.SUCCEEDED]

    # The outbox rows of the two workflow task runs, written in the finishing transaction.
    events = await workflow_store_for(store).workflow_event_claim("orch", 10, LEASE, DONE_AT)
    assert sorted((e.execution_id, e.workflow_run_id, e.status) for e in events) == sorted(
        [(ok.execution_id, run_id, "SUCCEEDED"), (dead.execution_id, run_id, "FAILED")]
    )


async def test_a_stale_result_does_not_hold_back_the_others_and_a_repeat_counts_once(
    store: Store,
) -> None:
    first, second = await _claim(store, [None, None])
    win = AttemptResult(
        first.execution_id, _token(first), AttemptStatus.SUCCEEDED, ExecutionStatus.SUCCEEDED
    )
    late = AttemptResult(
        second.execution_id, _token(second) + 1, AttemptStatus.SUCCEEDED, ExecutionStatus.SUCCEEDED
    )
    # The same result twice in one batch: the row is finished once, so it is accepted once.
    assert await store.attempt_finish_many([late, win, win], DONE_AT) == [False, True, False]
    # Already finished: the single-result form says so too.
    assert await store.attempt_finish(win, DONE_AT) is False
    assert (await _get(store, first)).status is ExecutionStatus.SUCCEEDED
    assert (await _get(store, second)).status is ExecutionStatus.RUNNING
    assert await store.attempt_finish_many([], DONE_AT) == []


async def test_a_reaper_result_loses_to_a_renewed_lease_within_a_batch(store: Store) -> None:
    renewed, expired = await _claim(store, [None, None])
    assert await store.execution_heartbeat(
        renewed.execution_id, _token(renewed), LEASE, T0 + timedelta(seconds=25)
    )
    later = T0 + LEASE + timedelta(seconds=1)
    lost = [
        AttemptResult(
            e.execution_id,
            _token(e),
            AttemptStatus.ABANDONED,
            ExecutionStatus.RETRY_WAIT,
            error={"kind": "lost", "message": "lease expired"},
            next_attempt_at=later + timedelta(seconds=2),
            lease_expired_only=True,
        )
        for e in (renewed, expired)
    ]
    assert await store.attempt_finish_many(lost, later) == [False, True]
    assert (await _get(store, renewed)).status is ExecutionStatus.RUNNING
    assert (await _get(store, expired)).status is ExecutionStatus.RETRY_WAIT


async def test_claims_record_attempts_and_hand_out_growing_tokens_across_batches(
    store: Store,
) -> None:
    first = await _claim(store, [None, None, None])
    second = await _claim(store, [None, None])
    tokens = [_token(e) for e in first + second]
    assert tokens == sorted(tokens) and len(set(tokens)) == 5
    for e in first + second:
        [attempt] = await store.attempt_list("acme", e.execution_id)
        assert (attempt.worker_id, attempt.fencing_token, attempt.status) == (
            "w1",
            e.fencing_token,
            AttemptStatus.RUNNING,
        )
        assert attempt.started_at == T0
    # A definition filter that matches nothing claims nothing.
    await store.execution_insert_many([new_execution()])
    assert await store.execution_claim_ready("w2", 5, LEASE, T0, ["registry://jobs/other"]) == []
    [only] = await store.execution_claim_ready("w2", 5, LEASE, T0, ["registry://jobs/greet"])
    assert _token(only) > max(tokens)


async def test_postgres_finishes_plain_results_without_a_transaction(store: Store) -> None:
    """The common batch (final statuses, outputs inline, no workflow task run, no dead letter) is
    one autocommit statement on PostgreSQL: no BEGIN/COMMIT round trips. A dead letter (its
    webhook outbox row) and a workflow task run (its workflow outbox row) are left by that
    statement and finished in a transaction."""
    if not isinstance(store, PostgresStore):
        pytest.skip("round trips are PostgreSQL's")
    run_id = uuid.uuid4()
    plain, failed, task = await _claim(store, [None, "k", f"wf:{run_id}:load"])
    opened: list[int] = []
    signalling_tx = store._signalling_tx

    def counted() -> Any:
        opened.append(len(opened))
        return signalling_tx()

    store._signalling_tx = counted  # type: ignore[method-assign]
    ok, err = AttemptStatus.SUCCEEDED, ExecutionStatus.SUCCEEDED
    results = [
        AttemptResult(plain.execution_id, _token(plain), ok, err, output={"n": 1}),
        AttemptResult(
            failed.execution_id, _token(failed), AttemptStatus.FAILED, ExecutionStatus.FAILED,
            error={"kind": "permanent", "message": "no"},
        ),
    ]  # fmt: skip
    assert await store.attempt_finish_many(results[:1], DONE_AT) == [True]
    assert opened == []
    assert await store.attempt_finish_many(results[1:], DONE_AT) == [True]
    assert opened == [0]  # the dead letter
    finish_task = AttemptResult(task.execution_id, _token(task), ok, err, output={})
    assert await store.attempt_finish_many([*results, finish_task], DONE_AT) == [
        False,
        False,
        True,
    ]
    assert opened == [0, 1]  # the workflow task run, and the two already finished (refused again)
    events = await workflow_store_for(store).workflow_event_claim("orch", 10, LEASE, DONE_AT)
    assert [(e.execution_id, e.status) for e in events] == [(task.execution_id, "SUCCEEDED")]
    assert (await _get(store, plain)).output == {"n": 1}
    assert (await _get(store, failed)).status is ExecutionStatus.FAILED
