"""The queue gauges outside the API process: a worker or scheduler serving its own metrics
publishes the cluster's queue depth, oldest READY age and workers alive, refreshed only while
it is scraped. Both backends, fake clock."""

from __future__ import annotations

from datetime import timedelta

from tests.factories import T0, definition, new_execution
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.concurrency import ConcurrencySpec
from tickwheel.domain.submission import SubmitRequest, prepare_execution
from tickwheel.engine.queue_gauges import QueueGauges
from tickwheel.observability.metrics import Metrics
from tickwheel.store.protocol import Store


async def test_gauges_hold_the_database_counts_and_follow_scrapes(store: Store) -> None:
    clock = FakeClock(T0)
    metrics = Metrics()
    gauges = QueueGauges(store, clock, metrics=metrics, idle_after=60)
    await store.execution_insert_many(
        [
            new_execution(now=T0 - timedelta(seconds=30)),  # READY since 30 s
            new_execution(now=T0),  # READY now
            new_execution(now=T0, execute_in=600),  # SCHEDULED
        ]
    )

    assert await gauges.run_once() == 1  # the first refresh comes unasked
    assert metrics.value("tickwheel_queue_depth", status="READY") == 2
    assert metrics.value("tickwheel_queue_depth", status="SCHEDULED") == 1
    assert metrics.value("tickwheel_queue_depth", status="RUNNING") == 0
    assert metrics.value("tickwheel_oldest_ready_age_seconds") == 30
    assert metrics.value("tickwheel_executions_finished_window_seconds") == 300

    # Nobody scraped since: no counting queries.
    await store.execution_insert_many([new_execution(now=T0, execute_in=900)])
    assert await gauges.run_once() == 0
    assert metrics.value("tickwheel_queue_depth", status="SCHEDULED") == 1

    metrics.render()  # a scrape
    assert await gauges.run_once() == 1
    assert metrics.value("tickwheel_queue_depth", status="SCHEDULED") == 2
    clock.advance(10)
    metrics.render()
    assert await gauges.run_once() == 1
    assert metrics.value("tickwheel_oldest_ready_age_seconds") == 40


async def test_scrapes_stop_and_so_do_the_refreshes(store: Store) -> None:
    metrics = Metrics()
    gauges = QueueGauges(store, FakeClock(T0), metrics=metrics, idle_after=0.0)
    assert await gauges.run_once() == 1
    metrics.render()  # scraped, but idle_after=0: that scrape is already too old
    assert await gauges.run_once() == 0
    assert gauges.refreshes == 1


async def test_the_marker_adds_no_series_and_leaves_with_the_service(store: Store) -> None:
    metrics = Metrics()
    before = metrics.render()
    gauges = QueueGauges(store, FakeClock(T0), metrics=metrics)
    assert metrics.render() == before
    seen = gauges.marker.last
    assert seen is not None  # it was collected with that scrape
    gauges.stop()
    await gauges.run()  # stopped before its first round: it only unregisters
    metrics.render()
    assert gauges.marker.last == seen  # no longer collected with the registry


async def test_gauges_count_executions_waiting_for_a_concurrency_limit(store: Store) -> None:
    metrics = Metrics()
    gauges = QueueGauges(store, FakeClock(T0), metrics=metrics)
    spec = ConcurrencySpec(limit=1, key="${{ inputs.name }}")
    request = SubmitRequest("registry://jobs/greet", {"name": "Ada"}, concurrency=spec)
    await store.execution_insert_many([prepare_execution(request, definition(), "acme", T0)
                                       for _ in range(3)])  # fmt: skip
    await store.execution_claim_ready("w", 10, timedelta(seconds=30), T0)
    assert await gauges.run_once() == 1
    assert metrics.value("tickwheel_concurrency_waiting") == 2
    assert metrics.value("tickwheel_concurrency_slots_held") == 1


async def test_rate_limit_gauges_show_tokens_and_what_waits(store: Store) -> None:
    from tickwheel.domain.rate_limits import RateLimitSpec

    clock = FakeClock(T0)
    metrics = Metrics()
    gauges = QueueGauges(store, clock, metrics=metrics, idle_after=60)
    await gauges.run_once()
    assert metrics.value("tickwheel_rate_limit_buckets_empty") == 0
    await store.rate_limit_set("acme", "registry://jobs/greet", RateLimitSpec(2, 1.0), 1, T0)
    await store.rate_limit_set("acme", "", RateLimitSpec(100, 1.0), None, T0)
    await store.execution_insert_many([new_execution(now=T0) for _ in range(5)])
    assert len(await store.execution_claim_ready("w", 10, timedelta(seconds=30), T0)) == 2
    metrics.render()
    assert await gauges.run_once() == 1
    assert metrics.value("tickwheel_rate_limited_waiting", definition="greet") == 3
    assert metrics.value("tickwheel_rate_limit_tokens", definition="greet") == 0
    assert metrics.value("tickwheel_rate_limit_tokens", definition="(tenant)") == 98
    assert metrics.value("tickwheel_rate_limit_buckets_empty") == 1
