"""The worker's batching: claims of several slots at once, finished attempts reported in
batches (one transaction each), nothing acknowledged before its batch commits, everything
reported at shutdown, stale results dropped and counted; and an idle worker woken by
LISTEN/NOTIFY rather than by polling."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

import psycopg
import pytest

from tests.engine.recording import RecordingStore
from tests.factories import T0, definition, new_execution, stored
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.models import Execution
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.engine.reaper import Reaper
from tickwheel.engine.worker import Worker
from tickwheel.services.settings import WorkerSettings
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.protocol import AttemptResult, Store

LEASE = timedelta(seconds=30)


class CountingStore(RecordingStore):
    """The store, with a record of each claim (slots asked, executions got) and of each batch
    of finished attempts reported."""


async def _submit(store: Store, n: int) -> list[Execution]:
    outcomes = await store.execution_insert_many([new_execution() for _ in range(n)])
    return [o.execution for o in outcomes]


async def _statuses(store: Store, executions: list[Execution]) -> list[ExecutionStatus]:
    found = [await store.execution_get("acme", e.execution_id) for e in executions]
    return [e.status for e in found if e is not None]


async def _until(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


@pytest.fixture
async def greet(store: Store) -> Store:
    assert await store.definition_insert(stored(definition()))
    return store


async def test_a_batching_worker_runs_each_execution_exactly_once(greet: Store) -> None:
    counting = CountingStore(greet)
    worker = Worker(
        cast(Store, counting),
        FakeClock(T0),
        worker_id="w1",
        settings=WorkerSettings(
            concurrency=8,
            low_water=4,
            claim_wait=10.0,  # only freed slots end the wait: the test does not depend on timing
            poll=0.05,
            finish_batch=16,
            finish_interval=0.005,
        ),
    )
    executions = await _submit(greet, 60)
    running = asyncio.create_task(worker.run())

    async def all_done() -> bool:
        return worker.finished == len(executions)

    try:
        await _until(all_done)
    finally:
        await worker.shutdown(grace=5)
        await running
    assert await _statuses(greet, executions) == [ExecutionStatus.SUCCEEDED] * 60
    for e in executions:
        [attempt] = await greet.attempt_list("acme", e.execution_id)
        assert attempt.status is AttemptStatus.SUCCEEDED and attempt.worker_id == "w1"
    assert worker.stale_writes == 0
    # Several attempts per transaction, each reported once.
    assert sum(counting.batches) == 60
    assert len(counting.batches) < 60
    assert max(counting.batches) <= 16
    # While more work was queued, the worker waited for a quarter of its slots before claiming
    # (once the queue looked empty it may ask for fewer: those claims found nothing here).
    assert sum(got for _, got in counting.claims) == 60
    assert all(asked >= 4 for asked, got in counting.claims if got), counting.claims


async def test_short_jobs_are_claimed_a_full_set_of_slots_at_a_time(store: Store) -> None:
    """Attempts created by a claim finish during the next claim's round trip when that claim is
    sent at once: short jobs then alternated small and large claims (2, 8, 2, 8 of 10 slots),
    twice the claims needed. The worker lets them finish first and claims every slot."""
    quick = definition(
        inputs={"a": "integer", "b": "integer"},
        outputs={"sum": "integer"},
        execution={"type": "python", "entrypoint": "tests.engine.jobs_for_tests:async_add"},
    )
    assert await store.definition_insert(stored(quick))
    counting = CountingStore(store)
    worker = Worker(
        cast(Store, counting),
        FakeClock(T0),
        worker_id="w1",
        # The claims' sizes without claiming ahead (test_claim_ahead.py has it on).
        settings=WorkerSettings(concurrency=10, poll=0.05, claim_ahead=False),
    )
    outcomes = await store.execution_insert_many(
        [new_execution(d=quick, inputs={"a": i, "b": 1}) for i in range(100)]
    )
    running = asyncio.create_task(worker.run())

    async def all_done() -> bool:
        return worker.finished == len(outcomes)

    try:
        await _until(all_done)
    finally:
        await worker.shutdown(grace=5)
        await running
    got = [n for _, n in counting.claims if n]
    assert sum(got) == 100
    # The first attempts look their definition up in the store (a real wait), so the claims
    # around them may come short; every later one takes all 10 slots.
    assert len(got) <= 12, counting.claims
    assert got[3:-1] == [10] * (len(got) - 4), counting.claims


async def test_a_result_is_not_acknowledged_before_its_batch_and_shutdown_reports_it(
    greet: Store,
) -> None:
    worker = Worker(
        greet,
        FakeClock(T0),
        worker_id="w1",
        settings=WorkerSettings(
            concurrency=4,
            finish_batch=100,
            finish_interval=3600,  # no batch goes out on its own during this test
        ),
    )
    executions = await _submit(greet, 3)
    assert await worker.run_once() == 3

    async def handlers_done() -> bool:
        return not worker.running

    await _until(handlers_done)
    # The handlers are done and their slots free, but nothing is acknowledged yet.
    assert len(worker.results) == 3
    assert await _statuses(greet, executions) == [ExecutionStatus.RUNNING] * 3
    assert await worker.shutdown(grace=1) == 0
    assert len(worker.results) == 0
    assert worker.finished == 3
    assert await _statuses(greet, executions) == [ExecutionStatus.SUCCEEDED] * 3


async def test_results_whose_lease_was_lost_are_dropped_and_counted_the_others_commit(
    greet: Store,
) -> None:
    clock = FakeClock(T0)
    worker = Worker(
        greet,
        clock,
        worker_id="w1",
        settings=WorkerSettings(finish_batch=100, finish_interval=3600),
    )
    lost = await _submit(greet, 2)
    assert await worker.run_once() == 2

    async def handlers_done() -> bool:
        return not worker.running

    await _until(handlers_done)
    # Before the buffered results go out, the leases expire and the reaper moves on.
    clock.advance(LEASE.total_seconds() + 1)
    assert await Reaper(greet, clock, uniform=lambda low, high: high).run_once() == 2
    fresh = await _submit(greet, 1)
    assert await worker.run_once() == 1
    await worker.drain()  # one batch: two stale results and one current
    assert worker.stale_writes == 2
    assert worker.finished == 1
    assert await _statuses(greet, lost) == [ExecutionStatus.RETRY_WAIT] * 2
    assert await _statuses(greet, fresh) == [ExecutionStatus.SUCCEEDED]
    for e in lost:
        [attempt] = await greet.attempt_list("acme", e.execution_id)
        assert attempt.status is AttemptStatus.ABANDONED


class FailingReports(CountingStore):
    """The store, but the next ``failures`` reports of finished attempts fail as if the
    database were down."""

    def __init__(self, store: Store, failures: int) -> None:
        super().__init__(store)
        self.failures = failures

    async def attempt_finish_many(
        self, results: Sequence[AttemptResult], now: datetime | None = None
    ) -> list[bool]:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("the database is down")
        return await super().attempt_finish_many(results, now)


async def test_a_failed_report_is_kept_and_retried_and_given_up_only_when_stopping(
    greet: Store,
) -> None:
    failing = FailingReports(greet, failures=1)
    worker = Worker(
        cast(Store, failing),
        FakeClock(T0),
        worker_id="w1",
        settings=WorkerSettings(finish_interval=0),
    )
    first = await _submit(greet, 2)
    assert await worker.run_once() == 2
    await worker.drain()  # the first report fails; the same results go again and commit
    assert worker.finished == 2
    assert await _statuses(greet, first) == [ExecutionStatus.SUCCEEDED] * 2
    assert failing.batches == [2]  # only the call that reached the database is counted

    failing.failures = 100
    second = await _submit(greet, 1)
    assert await worker.run_once() == 1

    async def handlers_done() -> bool:
        return not worker.running

    await _until(handlers_done)
    worker.stop()
    await worker.flush()  # stopping: a failing report is given up instead of retried forever
    assert len(worker.results) == 0 and worker.finished == 2
    # Not acknowledged: the execution stays RUNNING until its lease expires and it is reaped.
    assert await _statuses(greet, second) == [ExecutionStatus.RUNNING]


# -- PostgreSQL: woken by NOTIFY --------------------------------------------------------------


@pytest.fixture
async def two_pg_stores(pg_url: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    first = await PostgresStore.open(pg_url, max_size=2)
    second = await PostgresStore.open(pg_url, max_size=2)
    try:
        await first.migrate()
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            await conn.execute(
                "TRUNCATE execution_events, attempts, executions, definitions, pauses CASCADE"
            )
        yield first, second
    finally:
        await first.close()
        await second.close()


@pytest.mark.postgres
async def test_an_idle_worker_is_woken_by_notify_not_by_its_poll(
    two_pg_stores: tuple[PostgresStore, PostgresStore],
) -> None:
    workers_store, submitter = two_pg_stores
    assert await workers_store.definition_insert(stored(definition()))
    # A poll far longer than the test: only the notification can wake the worker in time.
    worker = Worker(
        workers_store, worker_id="w1", settings=WorkerSettings(poll=60.0, finish_interval=0.005)
    )
    assert await workers_store.listen(5)
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.sleep(0.2)  # the worker found nothing and sleeps
        started = time.monotonic()
        [e] = await _submit(submitter, 1)

        async def done() -> bool:
            return worker.finished == 1

        await _until(done, timeout=5)
        assert time.monotonic() - started < 5
    finally:
        await worker.shutdown(grace=5)
        await running
    assert await _statuses(submitter, [e]) == [ExecutionStatus.SUCCEEDED]


async def test_attempts_that_miss_the_definition_cache_together_share_one_lookup(
    greet: Store,
) -> None:
    """A herd's first claim starts ten attempts of one definition with the cache still empty:
    one ``definition_get``, not ten, and every attempt runs with what it returned."""
    lookups: list[str] = []

    class Lookups(CountingStore):
        async def definition_get(self, tenant: str, name: str, version: int | None = None) -> Any:
            lookups.append(name)
            await asyncio.sleep(0.01)  # the lookup's round trip: the other attempts miss too
            return await self.store.definition_get(tenant, name, version)

    worker = Worker(
        cast(Store, Lookups(greet)),
        FakeClock(T0),
        worker_id="w1",
        settings=WorkerSettings(concurrency=10),
    )
    executions = await _submit(greet, 10)
    assert await worker.run_once() == 10
    await worker.drain()
    assert lookups == ["greet"]
    assert worker.finished == 10 and worker.stale_writes == 0
    assert await _statuses(greet, executions) == [ExecutionStatus.SUCCEEDED] * 10
