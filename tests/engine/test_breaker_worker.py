"""The circuit breaker through a real worker and scheduler (in this process, fake clock, both
backends): consecutive failed attempts open it and the definition's other executions wait
READY; after the cool-down the scheduler lets one probe through; its success closes the breaker
and the rest run. A definition without a breaker never touches the breakers' table."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.engine.helpers import TEST_POLICY
from tests.factories import T0, stored
from tickwheel.app.executions import ExecutionService
from tickwheel.domain.breaker import BreakerState
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.definitions import definition_from_document
from tickwheel.domain.models import Execution
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import SubmitRequest
from tickwheel.engine.runners import default_runners
from tickwheel.engine.scheduler import Scheduler
from tickwheel.engine.worker import Worker
from tickwheel.observability.metrics import Metrics
from tickwheel.services.settings import WorkerSettings
from tickwheel.store.protocol import Store

URI = "registry://jobs/pay"


def doc(**extra: Any) -> dict[str, Any]:
    return {
        "name": "pay",
        "version": 1,
        "inputs": {"fail": "boolean"},
        "outputs": {"ok": "boolean"},
        "execution": {"type": "python", "entrypoint": "tests.engine.jobs_for_tests:maybe_fails"},
        "retry": {"maxAttempts": 1},
        **extra,
    }


async def start(store: Store, **extra: Any) -> tuple[Worker, ExecutionService, FakeClock]:
    assert await store.definition_insert(stored(definition_from_document(doc(**extra))))
    clock = FakeClock(T0)
    worker = Worker(
        store,
        clock,
        worker_id="w1",
        runners=default_runners(policy=TEST_POLICY),
        # One claim per step: the tests follow the breaker one attempt at a time.
        settings=WorkerSettings(concurrency=1, claim_ahead=False),
    )
    worker.metrics = Metrics()
    return worker, ExecutionService(store, "acme", clock), clock


async def submit(service: ExecutionService, clock: FakeClock, *fails: bool) -> list[Execution]:
    made = []
    for fail in fails:
        clock.advance(1)  # one after the other in claim order
        written = await service.submit(SubmitRequest(URI, {"fail": fail}))
        made.append(written.value)
    return made


async def step(worker: Worker) -> int:
    claimed = await worker.run_once()
    await worker.drain()
    return claimed


async def status(service: ExecutionService, ex: Execution) -> ExecutionStatus:
    return (await service.get(ex.execution_id)).status


async def test_failures_open_the_breaker_a_probe_half_opens_it_and_its_success_closes_it(
    store: Store,
) -> None:
    breaker = {"consecutiveFailures": 2, "coolDown": "30s"}
    worker, service, clock = await start(store, circuitBreaker=breaker)
    first, second, probe, last = await submit(service, clock, True, True, False, False)
    assert await step(worker) == 1 and await step(worker) == 1
    assert (
        worker.metrics.value(
            "tickwheel_circuit_breaker_transitions_total", definition="pay", to_state="open"
        )
        == 1
    )
    # Open: the rest wait READY, nothing is claimed, nothing fails.
    assert await step(worker) == 0
    assert [await status(service, e) for e in (probe, last)] == [ExecutionStatus.READY] * 2
    [pause] = await store.pause_list("acme")
    assert pause.reason == "2 consecutive failed attempts"

    scheduler = Scheduler(store, clock)
    scheduler.metrics = Metrics()
    clock.advance(29)
    await scheduler.run_once()
    assert await step(worker) == 0  # still cooling down
    clock.advance(1)
    await scheduler.run_once()
    [pause] = await store.pause_list("acme")
    assert pause.probe_execution_id == probe.execution_id
    assert await step(worker) == 1  # the probe, alone
    assert await status(service, probe) is ExecutionStatus.SUCCEEDED
    assert await store.pause_list("acme") == []
    assert await step(worker) == 1
    assert await status(service, last) is ExecutionStatus.SUCCEEDED

    history = await store.circuit_breaker_transitions("acme", URI, 10)
    assert [t.to_state for t in history] == [
        BreakerState.CLOSED,
        BreakerState.HALF_OPEN,
        BreakerState.OPEN,
    ]
    assert [t.at for t in history] == [
        clock.now(),
        T0 + timedelta(seconds=4 + 30),
        T0 + timedelta(seconds=4),
    ]
    assert {await status(service, e) for e in (first, second)} == {ExecutionStatus.FAILED}


async def test_a_failed_probe_opens_it_again(store: Store) -> None:
    breaker = {"failureRate": 0.5, "window": 2, "coolDown": 10}
    worker, service, clock = await start(store, circuitBreaker=breaker)
    await submit(service, clock, False, True, True, False)
    assert await step(worker) == 1 and await step(worker) == 1  # 1 of 2 failed: opens
    assert await step(worker) == 0
    clock.advance(10)
    assert await store.circuit_breaker_probe(clock.now()) == [URI]
    assert await step(worker) == 1  # the probe fails
    [b] = await store.circuit_breaker_list("acme")
    assert b.breaker.state is BreakerState.OPEN
    assert b.breaker.cool_down_until == clock.now() + timedelta(seconds=10)
    assert await step(worker) == 0


async def test_without_a_breaker_failures_touch_no_breaker(store: Store) -> None:
    worker, service, clock = await start(store)
    await submit(service, clock, True, True, True)
    assert [await step(worker) for _ in range(3)] == [1, 1, 1]
    assert await store.circuit_breaker_list("acme") == []
    assert await store.pause_list("acme") == []
