"""The orchestrator's tables (store/*/workflows.py) and the outbox row that the transaction
finishing a workflow's execution writes — on both backends."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from tests.factories import T0, new_execution
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.domain.workflow_runs import RETRYABLE_TASK, RunStatus, TaskRunStatus
from tickwheel.store.protocol import AttemptResult, Store
from tickwheel.store.workflow_protocol import (
    StoredWorkflow,
    WorkflowRunRecord,
    WorkflowStore,
    workflow_run_of_key,
)

LEASE = timedelta(seconds=30)
TR = TaskRunStatus


def workflows_of(store: Store) -> WorkflowStore:
    if store.dialect == "sqlite":
        return store.workflows  # type: ignore[attr-defined,no-any-return]
    from tickwheel.store.postgres.workflows import PostgresWorkflowStore

    return PostgresWorkflowStore(store.pool)  # type: ignore[attr-defined]


def run_record(key: str | None = "k1", tenant: str = "acme") -> WorkflowRunRecord:
    return WorkflowRunRecord(
        workflow_run_id=uuid.uuid4(),
        tenant=tenant,
        workflow_name="nightly",
        workflow_version=1,
        inputs={"day": "2026-03-01"},
        status=RunStatus.RUNNING,
        idempotency_key=key,
        request_hash="h",
        retry_count=0,
        created_at=T0,
        updated_at=T0,
    )


async def finish(store: Store, key: str | None, status: ExecutionStatus) -> uuid.UUID:
    item = new_execution(key=key)
    await store.execution_insert_many([item])
    [claimed] = await store.execution_claim_ready("w1", 1, LEASE, T0)
    assert claimed.fencing_token is not None
    result = AttemptResult(
        execution_id=item.execution_id,
        fencing_token=claimed.fencing_token,
        attempt_status=AttemptStatus.SUCCEEDED
        if status is ExecutionStatus.SUCCEEDED
        else AttemptStatus.FAILED,
        execution_status=status,
        output={"greeting": "hi"} if status is ExecutionStatus.SUCCEEDED else None,
        error=None if status is ExecutionStatus.SUCCEEDED else {"kind": "permanent"},
    )
    assert await store.attempt_finish(result, T0)
    return item.execution_id


def test_run_id_is_read_from_task_keys() -> None:
    run_id = uuid.uuid4()
    assert workflow_run_of_key(f"wf:{run_id}:extract") == run_id
    assert workflow_run_of_key(f"wf:{run_id}:extract:2") == run_id
    assert workflow_run_of_key("wf:nope:x") is None
    assert workflow_run_of_key("order-1") is None
    assert workflow_run_of_key(None) is None


async def test_definitions_are_immutable_and_versioned(store: Store) -> None:
    ws = workflows_of(store)
    doc: dict[str, Any] = {"name": "nightly", "version": 1, "tasks": []}
    v1 = StoredWorkflow("nightly", 1, doc, "h1", T0, "")
    assert await ws.workflow_definition_insert(v1)
    assert not await ws.workflow_definition_insert(StoredWorkflow("nightly", 1, doc, "h2", T0, ""))
    assert await ws.workflow_definition_insert(StoredWorkflow("nightly", 2, doc, "h3", T0, ""))
    assert await ws.workflow_definition_insert(StoredWorkflow("adhoc", 1, doc, "h4", T0, ""))
    latest = await ws.workflow_definition_get("acme", "nightly")
    assert latest is not None and latest.version == 2 and latest.document == doc
    first = await ws.workflow_definition_get("acme", "nightly", 1)
    assert first is not None and first.content_hash == "h1"
    assert await ws.workflow_definition_get("acme", "nightly", 9) is None
    assert [(d.name, d.version) for d in await ws.workflow_definition_list("acme")] == [
        ("adhoc", 1),
        ("nightly", 2),
    ]


async def test_runs_with_task_runs_guarded_updates_and_retry(store: Store) -> None:
    ws = workflows_of(store)
    run = run_record()
    assert await ws.workflow_run_insert(run, ["extract", "clean"])
    assert not await ws.workflow_run_insert(run_record(), ["x"])  # same tenant and key
    assert await ws.workflow_run_insert(run_record(tenant="other"), ["x"])
    assert await ws.workflow_run_insert(run_record(key=None), ["x"])
    assert await ws.workflow_run_insert(run_record(key=None), ["x"])
    assert await ws.workflow_run_get("acme", run.workflow_run_id) == run
    assert await ws.workflow_run_get(None, run.workflow_run_id) == run
    assert await ws.workflow_run_get("other", run.workflow_run_id) is None
    assert await ws.workflow_run_get_by_key("acme", "k1") == run
    tasks = await ws.workflow_task_run_list(run.workflow_run_id)
    assert [(t.task_name, t.status, t.execution_id) for t in tasks] == [
        ("extract", TR.PENDING, None),
        ("clean", TR.PENDING, None),
    ]
    rid, ex = run.workflow_run_id, uuid.uuid4()
    update = ws.workflow_task_run_update
    assert await update(rid, "extract", [TR.PENDING], TR.SUBMITTED, T0, ex, retry_count=0)
    assert not await update(rid, "extract", [TR.PENDING], TR.SKIPPED, T0, retry_count=0)
    assert await update(
        rid, "extract", [TR.SUBMITTED], TR.SUCCEEDED, T0, output={"rows": 3}, retry_count=0
    )
    assert await update(
        rid, "clean", [TR.PENDING], TR.FAILED, T0, error={"kind": "x"}, retry_count=0
    )
    extract, clean = await ws.workflow_task_run_list(rid)
    assert (extract.status, extract.execution_id, extract.output) == (TR.SUCCEEDED, ex, {"rows": 3})
    assert (clean.status, clean.error) == (TR.FAILED, {"kind": "x"})
    assert not await ws.workflow_run_retry(
        "acme", rid, RETRYABLE_TASK, T0, retry_count=0
    )  # RUNNING
    assert await ws.workflow_run_finish(rid, RunStatus.FAILED, T0, retry_count=0)
    assert not await ws.workflow_run_finish(rid, RunStatus.SUCCEEDED, T0, retry_count=0)
    assert await ws.workflow_run_retry("acme", rid, RETRYABLE_TASK, T0 + LEASE, retry_count=0)
    again = await ws.workflow_run_get("acme", rid)
    assert again is not None
    assert (again.status, again.retry_count, again.finished_at) == (RunStatus.RUNNING, 1, None)
    extract, clean = await ws.workflow_task_run_list(rid)
    assert extract.status is TR.SUCCEEDED and extract.output == {"rows": 3}
    assert (clean.status, clean.error, clean.execution_id) == (TR.PENDING, None, None)


async def test_a_retry_resets_a_task_that_failed_after_the_caller_read_the_run(
    store: Store,
) -> None:
    """Which tasks a retry resets is decided inside its transaction, by status: a task still
    SUBMITTED when the person looked, which failed just before the retry, is reset too (a plan
    from the earlier read left it FAILED, and the retried run failed again at once)."""
    ws = workflows_of(store)
    run = run_record()
    rid = run.workflow_run_id
    assert await ws.workflow_run_insert(run, ["extract", "clean", "stats"])
    update = ws.workflow_task_run_update
    assert await update(rid, "extract", [TR.PENDING], TR.SUBMITTED, T0, uuid.uuid4(), retry_count=0)
    assert await update(rid, "extract", [TR.SUBMITTED], TR.SUCCEEDED, T0, retry_count=0)
    assert await update(rid, "clean", [TR.PENDING], TR.CANCELLED, T0, retry_count=0)
    assert await update(rid, "stats", [TR.PENDING], TR.SUBMITTED, T0, uuid.uuid4(), retry_count=0)
    assert await ws.workflow_run_finish(rid, RunStatus.CANCELLED, T0, retry_count=0)
    read = {t.task_name: t.status for t in await ws.workflow_task_run_list(rid)}
    assert read["stats"] is TR.SUBMITTED  # what the person saw
    assert await update(rid, "stats", [TR.SUBMITTED], TR.FAILED, T0, retry_count=0)
    assert await ws.workflow_run_retry("acme", rid, RETRYABLE_TASK, T0 + LEASE, retry_count=0)
    after = {t.task_name: t.status for t in await ws.workflow_task_run_list(rid)}
    assert after == {"extract": TR.SUCCEEDED, "clean": TR.PENDING, "stats": TR.PENDING}


async def test_writes_for_an_older_retry_change_nothing(store: Store) -> None:
    """An advancer that read the run before a retry writes with the old ``retry_count``: the
    task runs the retry reset (or kept) and the retried run stay as the retry left them."""
    ws = workflows_of(store)
    run = run_record()
    rid, old, kept = run.workflow_run_id, uuid.uuid4(), uuid.uuid4()
    assert await ws.workflow_run_insert(run, ["extract", "clean", "stats"])
    update = ws.workflow_task_run_update
    assert await update(rid, "extract", [TR.PENDING], TR.SUBMITTED, T0, old, retry_count=0)
    assert await update(rid, "extract", [TR.SUBMITTED], TR.FAILED, T0, retry_count=0)
    assert await update(rid, "stats", [TR.PENDING], TR.SUBMITTED, T0, kept, retry_count=0)
    assert await ws.workflow_run_finish(rid, RunStatus.FAILED, T0, retry_count=0)
    assert await ws.workflow_run_retry("acme", rid, RETRYABLE_TASK, T0, retry_count=0)
    # A second retry based on the same read is refused, even once the run failed again.
    assert await ws.workflow_run_finish(rid, RunStatus.FAILED, T0, retry_count=1)
    assert not await ws.workflow_run_retry("acme", rid, RETRYABLE_TASK, T0, retry_count=0)
    assert await ws.workflow_run_retry("acme", rid, RETRYABLE_TASK, T0, retry_count=1)
    before = await ws.workflow_task_run_list(rid)

    # Retry 0's outcomes and submissions: refused, whatever status they expect.
    later = T0 + LEASE
    assert not await update(rid, "extract", [TR.PENDING], TR.SUBMITTED, later, old, retry_count=0)
    assert not await update(rid, "clean", [TR.PENDING], TR.SKIPPED, later, retry_count=0)
    assert not await update(
        rid, "stats", [TR.SUBMITTED], TR.SUCCEEDED, later, output={"x": 1}, retry_count=1
    )
    assert not await ws.workflow_run_finish(rid, RunStatus.FAILED, later, retry_count=1)
    assert await ws.workflow_task_run_list(rid) == before
    current = await ws.workflow_run_get("acme", rid)
    assert current is not None
    assert (current.status, current.retry_count) == (RunStatus.RUNNING, 2)

    # The current attempt's writes go through: a task kept SUBMITTED across the retries too.
    assert await update(rid, "stats", [TR.SUBMITTED], TR.SUCCEEDED, later, retry_count=2)
    assert await update(rid, "extract", [TR.PENDING], TR.SUBMITTED, later, old, retry_count=2)
    extract, clean, stats = await ws.workflow_task_run_list(rid)
    assert (extract.status, extract.execution_id) == (TR.SUBMITTED, old)
    assert (clean.status, stats.status, stats.execution_id) == (TR.PENDING, TR.SUCCEEDED, kept)
    assert await ws.workflow_run_finish(rid, RunStatus.CANCELLED, later, retry_count=2)


async def test_finishing_a_workflow_execution_writes_one_outbox_row(store: Store) -> None:
    ws = workflows_of(store)
    run_id = uuid.uuid4()
    await finish(store, "order-1", ExecutionStatus.SUCCEEDED)  # not a workflow's: no row
    await finish(store, None, ExecutionStatus.FAILED)
    ok = await finish(store, f"wf:{run_id}:extract", ExecutionStatus.SUCCEEDED)
    failed = await finish(store, f"wf:{run_id}:clean:1", ExecutionStatus.FAILED)
    events = await ws.workflow_event_claim("o1", 10, LEASE, T0)
    assert [(e.execution_id, e.workflow_run_id, e.status) for e in events] == [
        (ok, run_id, "SUCCEEDED"),
        (failed, run_id, "FAILED"),
    ]
    # Claimed rows are invisible to another orchestrator until the lease runs out.
    assert await ws.workflow_event_claim("o2", 10, LEASE, T0) == []
    taken = await ws.workflow_event_claim("o2", 1, LEASE, T0 + LEASE)
    assert [e.event_id for e in taken] == [events[0].event_id]
    assert await ws.workflow_event_delete("o1", [e.event_id for e in events]) == 1  # not ours
    assert await ws.workflow_event_delete("o2", [taken[0].event_id]) == 1
    assert await ws.workflow_event_claim("o3", 10, LEASE, T0 + 3 * LEASE) == []


async def test_cancelling_a_workflow_execution_writes_an_outbox_row(store: Store) -> None:
    ws = workflows_of(store)
    run_id = uuid.uuid4()
    item = new_execution(key=f"wf:{run_id}:publish", execute_in=60)
    plain = new_execution(key="plain", execute_in=60)
    await store.execution_insert_many([item, plain])
    assert await store.execution_cancel("acme", plain.execution_id, T0) is not None
    assert await store.execution_cancel("acme", item.execution_id, T0) is not None
    [event] = await ws.workflow_event_claim("o1", 10, LEASE, T0)
    assert (event.execution_id, event.status) == (item.execution_id, "CANCELLED")


async def test_a_retried_execution_writes_no_outbox_row(store: Store) -> None:
    ws = workflows_of(store)
    item = new_execution(key=f"wf:{uuid.uuid4()}:extract")
    await store.execution_insert_many([item])
    [claimed] = await store.execution_claim_ready("w1", 1, LEASE, T0)
    assert claimed.fencing_token is not None
    retry = AttemptResult(
        execution_id=item.execution_id,
        fencing_token=claimed.fencing_token,
        attempt_status=AttemptStatus.FAILED,
        execution_status=ExecutionStatus.RETRY_WAIT,
        error={"kind": "error"},
        next_attempt_at=T0 + LEASE,
    )
    assert await store.attempt_finish(retry, T0)
    assert await ws.workflow_event_claim("o1", 10, LEASE, T0) == []
