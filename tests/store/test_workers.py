"""The worker registry on both backends: a heartbeat upserts (``started_at`` kept), a stop is
recorded, and the list and the alive count look only at recent reports."""

from __future__ import annotations

from datetime import timedelta

from tests.factories import T0, new_execution
from tickwheel.domain.clock import FakeClock
from tickwheel.engine.worker import Worker
from tickwheel.services.settings import WorkerSettings
from tickwheel.store.protocol import Store

S = timedelta(seconds=1)


async def test_heartbeat_upserts_and_stop_is_recorded(store: Store) -> None:
    await store.worker_heartbeat("w1", "host-a", 11, 4, 0, T0)
    await store.worker_heartbeat("w1", "host-a", 11, 4, 3, T0 + 5 * S)
    await store.worker_heartbeat("w2", "host-b", 22, 8, 1, T0 + 6 * S)
    [w1, w2] = await store.worker_list(T0 - S)
    assert (w1.worker_id, w1.host, w1.pid, w1.concurrency, w1.running) == ("w1", "host-a", 11, 4, 3)
    assert w1.started_at == T0 and w1.last_heartbeat_at == T0 + 5 * S and w1.stopped_at is None
    assert w2.worker_id == "w2" and w2.concurrency == 8
    assert await store.worker_count_alive(T0 + 5 * S) == 2
    assert await store.worker_count_alive(T0 + 6 * S) == 1

    await store.worker_stopped("w2", T0 + 7 * S)
    stopped = {w.worker_id: w for w in await store.worker_list(T0)}["w2"]
    assert stopped.stopped_at == T0 + 7 * S and stopped.running == 0
    assert await store.worker_count_alive(T0) == 1
    # Only recent reports are listed: the registry's index bounds the read.
    assert [w.worker_id for w in await store.worker_list(T0 + 6 * S)] == ["w2"]


async def test_oldest_ready_is_the_longest_waiting_ready_execution(store: Store) -> None:
    assert await store.execution_oldest_ready_at() is None
    await store.execution_insert_many([new_execution(now=T0), new_execution(now=T0 + 5 * S)])
    assert await store.execution_oldest_ready_at() == T0


async def test_the_worker_reports_itself_and_its_stop(store: Store) -> None:
    clock = FakeClock(T0)
    worker = Worker(store, clock, worker_id="wk", settings=WorkerSettings(concurrency=2))
    await worker.run_once()
    [row] = await store.worker_list(T0 - S)
    assert (row.worker_id, row.concurrency, row.last_heartbeat_at) == ("wk", 2, T0)
    clock.advance(1.0)
    await worker.run_once()  # within the report interval: no second write
    assert (await store.worker_list(T0 - S))[0].last_heartbeat_at == T0
    await worker.shutdown(0.1)
    assert (await store.worker_list(T0 - S))[0].stopped_at == T0 + S
