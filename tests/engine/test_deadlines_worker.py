"""Deadlines through a real worker and scheduler (in this process, fake clock, both backends):
an execution not started by its startBy ends EXPIRED by the scheduler's sweep, or by its worker
when the claim came first (it is not run); a retry that would start after the deadline is not
made; an attempt claimed after the deadline is not run and ends FAILED."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.engine.helpers import TEST_POLICY
from tests.factories import T0, stored
from tickwheel.app.executions import ExecutionService
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.definitions import definition_from_document
from tickwheel.domain.models import Execution, ExecutionEventKind
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.domain.submission import SubmitRequest
from tickwheel.engine.runners import default_runners
from tickwheel.engine.scheduler import Scheduler
from tickwheel.engine.worker import Worker
from tickwheel.observability.metrics import Metrics
from tickwheel.services.settings import WorkerSettings
from tickwheel.store.protocol import Store

URI = "registry://jobs/pay"
DOC: dict[str, Any] = {
    "name": "pay",
    "version": 1,
    "inputs": {"fail": "boolean"},
    "outputs": {"ok": "boolean"},
    "execution": {"type": "python", "entrypoint": "tests.engine.jobs_for_tests:maybe_fails"},
    "retry": {"maxAttempts": 3, "baseDelay": 10, "maxDelay": 10},
}


async def start(store: Store) -> tuple[Worker, Scheduler, ExecutionService, FakeClock]:
    assert await store.definition_insert(stored(definition_from_document(DOC)))
    clock = FakeClock(T0)
    worker = Worker(
        store,
        clock,
        worker_id="w1",
        runners=default_runners(policy=TEST_POLICY),
        uniform=lambda low, high: high,  # the longest backoff: 10 s
        settings=WorkerSettings(concurrency=1),
    )
    worker.metrics = Metrics()
    scheduler = Scheduler(store, clock)
    scheduler.metrics = Metrics()
    return worker, scheduler, ExecutionService(store, "acme", clock), clock


async def submit(service: ExecutionService, fail: bool, **limits: Any) -> Execution:
    written = await service.submit(SubmitRequest(URI, {"fail": fail}, **limits))
    return written.value


async def step(worker: Worker) -> int:
    claimed = await worker.run_once()
    await worker.drain()
    return claimed


async def test_the_sweep_expires_what_did_not_start_by_its_start_by(store: Store) -> None:
    worker, scheduler, service, clock = await start(store)
    ex = await submit(service, False, start_by=T0 + timedelta(seconds=10))
    clock.advance(11)
    await scheduler.run_once()
    got = await service.get(ex.execution_id)
    assert got.status is ExecutionStatus.EXPIRED and got.finished_at == clock.now()
    assert got.error is not None and got.error["message"] == "not started by its startBy"
    assert [e.kind for e in await service.history(ex.execution_id)] == [ExecutionEventKind.EXPIRED]
    assert scheduler.metrics.value("tickwheel_executions_expired_total", definition="pay") == 1
    assert await step(worker) == 0


async def test_a_claim_after_start_by_is_not_run(store: Store) -> None:
    worker, _, service, clock = await start(store)
    ex = await submit(service, False, start_by=T0 + timedelta(seconds=10))
    clock.advance(11)  # no sweep came: the worker claims it, too late
    assert await step(worker) == 1
    got = await service.get(ex.execution_id)
    assert got.status is ExecutionStatus.EXPIRED and got.output is None
    assert got.error is not None and got.error["kind"] == "expired"
    [attempt] = await store.attempt_list("acme", ex.execution_id)
    assert attempt.status is AttemptStatus.ABANDONED


async def test_no_retry_starts_after_the_deadline(store: Store) -> None:
    worker, _, service, _ = await start(store)
    ex = await submit(service, True, deadline=T0 + timedelta(seconds=5))
    assert await step(worker) == 1  # fails; its retry would come 10 s later, past the deadline
    got = await service.get(ex.execution_id)
    assert got.status is ExecutionStatus.FAILED and got.attempt_count == 1
    assert got.error is not None and "after the deadline" in got.error["deadline"]


async def test_an_attempt_claimed_after_the_deadline_is_not_run(store: Store) -> None:
    worker, scheduler, service, clock = await start(store)
    ex = await submit(service, True, deadline=T0 + timedelta(seconds=30))
    assert await step(worker) == 1  # fails at T0: retry at T0 + 10 s, within the deadline
    assert (await service.get(ex.execution_id)).status is ExecutionStatus.RETRY_WAIT
    clock.advance(31)  # the scheduler was late: promoted after the deadline
    await scheduler.run_once()
    assert (await service.get(ex.execution_id)).status is ExecutionStatus.READY  # it started
    assert await step(worker) == 1
    got = await service.get(ex.execution_id)
    assert got.status is ExecutionStatus.FAILED
    assert got.error is not None and got.error["kind"] == "deadline"
    attempts = await store.attempt_list("acme", ex.execution_id)
    assert [a.status for a in attempts] == [AttemptStatus.FAILED, AttemptStatus.FAILED]


async def test_in_time_it_runs_as_usual(store: Store) -> None:
    worker, scheduler, service, clock = await start(store)
    ex = await submit(
        service, False, start_by=T0 + timedelta(seconds=10), deadline=T0 + timedelta(minutes=1)
    )
    clock.advance(5)
    await scheduler.run_once()
    assert await step(worker) == 1
    assert (await service.get(ex.execution_id)).status is ExecutionStatus.SUCCEEDED
