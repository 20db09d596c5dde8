"""Webhooks on both backends: an outbox row is written in the transaction of its event (a dead
letter, a missed or failed cron occurrence, a failed workflow run) and only for a tenant that
listens; deliveries are claimed under a lease; a tenant never reads another's webhooks."""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.cron_factories import audit, cron_job, record
from tests.factories import T0, new_execution
from tests.store.test_workflow_store import run_record, workflows_of
from tickwheel.domain.cron_jobs import Outcome
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.domain.webhooks import DeliveryStatus, WebhookEvent, WebhookSubscription
from tickwheel.domain.workflow_runs import RunStatus
from tickwheel.store.cron_protocol import CronAdvance
from tickwheel.store.factory import cron_store_for, webhook_store_for
from tickwheel.store.protocol import AttemptResult, Store
from tickwheel.store.webhook_protocol import WebhookStore

LEASE = timedelta(seconds=30)


def iso_micro(at: datetime) -> str:
    """How a payload writes an instant on both backends: UTC, six digits, ``Z``."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def subscription(tenant: str = "acme", *events: WebhookEvent) -> WebhookSubscription:
    return WebhookSubscription(
        webhook_id=uuid.uuid4(),
        tenant=tenant,
        url="https://hooks.example.com/tw",
        events=events or (WebhookEvent.EXECUTION_FAILED,),
        secret="whsec_test",
        created_at=T0,
    )


async def _dead_letter(store: Store, tenant: str = "acme") -> uuid.UUID:
    """A claimed execution of ``tenant`` finished FAILED (its last attempt)."""
    await store.execution_insert_many([new_execution(tenant)])
    [claimed] = await store.execution_claim_ready("w1", 1, LEASE, T0)
    assert claimed.fencing_token is not None
    [ok] = await store.attempt_finish_many(
        [
            AttemptResult(
                claimed.execution_id,
                claimed.fencing_token,
                AttemptStatus.FAILED,
                ExecutionStatus.FAILED,
                error={"kind": "permanent", "message": "no", "attempt": 1},
            )
        ],
        T0,
    )
    assert ok
    return claimed.execution_id


async def _pending(hooks: WebhookStore, owner: str = "s1") -> list[Any]:
    return await hooks.webhook_delivery_claim(owner, 100, LEASE, T0 + timedelta(seconds=1))


async def test_a_dead_letter_notifies_the_tenants_listening_subscriptions_only(
    store: Store,
) -> None:
    hooks = webhook_store_for(store)
    listening = subscription("acme")
    await hooks.webhook_insert(listening)
    await hooks.webhook_insert(subscription("acme", WebhookEvent.CRON_FAILED))
    await hooks.webhook_insert(subscription("other"))
    execution_id = await _dead_letter(store)
    [job] = await _pending(hooks)
    assert job.url == listening.url and job.secret == "whsec_test"
    d = job.delivery
    assert (d.webhook_id, d.tenant, d.event) == (listening.webhook_id, "acme", "execution.failed")
    assert d.payload["executionId"] == str(execution_id)
    assert d.payload["definitionUri"] == "registry://jobs/greet"
    assert d.payload["error"]["message"] == "no"
    assert d.payload["failedAt"] == iso_micro(T0)
    assert d.attempts == 1


async def test_no_subscription_no_outbox_row(store: Store) -> None:
    hooks = webhook_store_for(store)
    await hooks.webhook_insert(subscription("other"))
    await _dead_letter(store, "acme")
    assert await _pending(hooks) == []


@pytest.mark.parametrize("event_path", ["claims", "store"])
async def test_a_rolled_back_dead_letter_leaves_no_outbox_row(
    store: Store, monkeypatch: pytest.MonkeyPatch, event_path: str
) -> None:
    """The outbox row is written, then the transaction fails: neither it nor the dead letter
    remains (the worker's finish, and the reaper's)."""
    hooks = webhook_store_for(store)
    await hooks.webhook_insert(subscription("acme"))
    backend = "sqlite" if store.dialect == "sqlite" else "postgres"
    module = importlib.import_module(f"tickwheel.store.{backend}.{event_path}")
    real: Callable[..., Awaitable[None]] = module.webhook_outbox_execution_failed

    async def then_fail(*args: Any) -> None:
        await real(*args)
        raise RuntimeError("the transaction fails after the outbox row")

    monkeypatch.setattr(module, "webhook_outbox_execution_failed", then_fail)
    await store.execution_insert_many([new_execution()])
    [claimed] = await store.execution_claim_ready("w1", 1, LEASE, T0)
    assert claimed.fencing_token is not None
    result = AttemptResult(
        claimed.execution_id,
        claimed.fencing_token,
        AttemptStatus.ABANDONED if event_path == "store" else AttemptStatus.FAILED,
        ExecutionStatus.FAILED,
        error={"kind": "lost", "message": "gone"},
    )
    with pytest.raises(RuntimeError):
        if event_path == "store":
            await store.execution_reap([result], T0 + LEASE * 2)
        else:
            await store.attempt_finish_many([result], T0)
    monkeypatch.undo()
    got = await store.execution_get("acme", claimed.execution_id)
    assert got is not None and got.status is ExecutionStatus.RUNNING
    assert await _pending(hooks) == []
    # The same event, committed this time, writes its row.
    assert await store.execution_reap([result], T0 + LEASE * 2) == [claimed.execution_id]
    [job] = await hooks.webhook_delivery_claim("s1", 10, LEASE, T0 + LEASE * 3)
    assert job.delivery.payload["executionId"] == str(claimed.execution_id)


async def test_missed_and_failed_cron_occurrences_notify(store: Store) -> None:
    hooks, cron = webhook_store_for(store), cron_store_for(store)
    sub = subscription("acme", WebhookEvent.CRON_MISSED, WebhookEvent.CRON_FAILED)
    await hooks.webhook_insert(sub)
    job = cron_job()
    assert await cron.cron_job_insert(job, audit(job))
    missed = T0 - timedelta(hours=1)
    await cron.cron_occurrences_record(
        [
            record(job.cron_job_id, missed, Outcome.SKIPPED_MISFIRE, reason="past the grace"),
            record(job.cron_job_id, T0, Outcome.SUBMITTED, execution_id=uuid.uuid4()),
        ]
    )
    assert await cron.cron_occurrences_record(
        [record(job.cron_job_id, T0, Outcome.FAILED, reason="refused")]
    ) == {job.cron_job_id}
    jobs = sorted(await _pending(hooks), key=lambda j: str(j.delivery.event))
    assert [(j.delivery.event, j.delivery.payload["outcome"]) for j in jobs] == [
        ("cron.failed", "FAILED"),
        ("cron.missed", "SKIPPED_MISFIRE"),
    ]
    assert jobs[1].delivery.payload["cronJobName"] == job.spec.name
    assert jobs[1].delivery.payload["occurrence"] == iso_micro(missed)


async def test_a_tick_that_skips_a_missed_occurrence_notifies_with_its_advance(
    store: Store,
) -> None:
    """The Cron Service's path: the history row and its outbox row commit with the advance."""
    hooks, cron = webhook_store_for(store), cron_store_for(store)
    await hooks.webhook_insert(subscription("acme", WebhookEvent.CRON_MISSED))
    job = cron_job()
    assert await cron.cron_job_insert(job, audit(job))
    claim = await cron.cron_job_claim_due("c1", 10, timedelta(0), LEASE, now=T0)
    assert [j.cron_job_id for j in claim.jobs] == [job.cron_job_id]
    advance = CronAdvance(
        job.cron_job_id,
        job.version,
        job.next_run_at,
        T0 + timedelta(days=1),
        records=[record(job.cron_job_id, T0, Outcome.SKIPPED_MISFIRE, reason="late")],
    )
    lost = replace(advance, cron_job_id=uuid.uuid4())  # a deleted job: nothing recorded for it
    assert await cron.cron_job_advance_many("c1", [advance, lost], T0) == {job.cron_job_id}
    [job_row] = await _pending(hooks)
    assert job_row.delivery.event == "cron.missed"
    assert job_row.delivery.payload["cronJobId"] == str(job.cron_job_id)


async def test_a_failed_workflow_run_notifies(store: Store) -> None:
    hooks, ws = webhook_store_for(store), workflows_of(store)
    await hooks.webhook_insert(subscription("acme", WebhookEvent.WORKFLOW_RUN_FAILED))
    done, failed = run_record(key="a"), run_record(key="b")
    for run in (done, failed):
        assert await ws.workflow_run_insert(run, ["extract"])
    assert await ws.workflow_run_finish(
        done.workflow_run_id, RunStatus.SUCCEEDED, T0, retry_count=0
    )
    assert not await ws.workflow_run_finish(
        failed.workflow_run_id, RunStatus.FAILED, T0, retry_count=5
    )  # a stale finish: no event, no row
    assert await ws.workflow_run_finish(failed.workflow_run_id, RunStatus.FAILED, T0, retry_count=0)
    [job] = await _pending(hooks)
    assert job.delivery.event == "workflow_run.failed"
    assert job.delivery.payload["workflowRunId"] == str(failed.workflow_run_id)


async def test_claims_are_leased_and_a_finish_is_guarded_by_the_claim(store: Store) -> None:
    hooks = webhook_store_for(store)
    await hooks.webhook_insert(subscription("acme"))
    await _dead_letter(store)
    [job] = await _pending(hooks, "s1")
    assert await _pending(hooks, "s2") == []  # leased to s1
    later = T0 + LEASE * 2
    [again] = await hooks.webhook_delivery_claim("s2", 10, LEASE, later)  # s1's lease ended
    assert again.delivery.attempts == 2
    finish = hooks.webhook_delivery_finish
    kw: dict[str, Any] = {"response_code": 200, "last_error": None, "next_attempt_at": None}
    assert not await finish(job.delivery, "s1", DeliveryStatus.DELIVERED, **kw, now=later)
    retry_at = later + timedelta(seconds=10)
    kw = {"response_code": 500, "last_error": "answered 500", "next_attempt_at": retry_at}
    assert await finish(again.delivery, "s2", DeliveryStatus.PENDING, **kw, now=later)
    [row] = await hooks.webhook_delivery_list("acme", job.delivery.webhook_id, 10)
    assert (row.status, row.attempts, row.response_code) == (DeliveryStatus.PENDING, 2, 500)
    assert (row.last_error, row.next_attempt_at, row.finished_at) == (
        "answered 500",
        retry_at,
        None,
    )
    assert (
        await hooks.webhook_delivery_claim("s2", 10, LEASE, retry_at - timedelta(seconds=1)) == []
    )
    [third] = await hooks.webhook_delivery_claim("s2", 10, LEASE, retry_at)
    kw = {"response_code": 204, "last_error": None, "next_attempt_at": None}
    assert await finish(third.delivery, "s2", DeliveryStatus.DELIVERED, **kw, now=retry_at)
    [row] = await hooks.webhook_delivery_list("acme", job.delivery.webhook_id, 10)
    assert (row.status, row.attempts, row.finished_at) == (DeliveryStatus.DELIVERED, 3, retry_at)


async def test_a_tenant_never_reads_or_deletes_another_tenants_webhooks(store: Store) -> None:
    hooks = webhook_store_for(store)
    theirs = subscription("other")
    await hooks.webhook_insert(theirs)
    await _dead_letter(store, "other")
    assert await hooks.webhook_get("acme", theirs.webhook_id) is None
    assert await hooks.webhook_list("acme") == []
    assert await hooks.webhook_delivery_list("acme", theirs.webhook_id, 10) == []
    assert not await hooks.webhook_delete("acme", theirs.webhook_id)
    assert await hooks.webhook_get("other", theirs.webhook_id) == theirs
    assert len(await hooks.webhook_delivery_list("other", theirs.webhook_id, 10)) == 1
    assert await hooks.webhook_delete("other", theirs.webhook_id)
    assert await hooks.webhook_list("other") == []
