"""The cluster's queue gauges (depth by status, oldest READY age, workers alive) for every
process that serves metrics, not only the API process.

The figures come from the database, so they are the same in every process that publishes them
(aggregate with ``max`` across scrape targets). Counting costs queries, so a process refreshes
them only while someone scrapes it: at most every ``every`` seconds, and not at all once no scrape
has come for ``idle_after`` seconds. The API's ``/metrics`` refreshes on the scrape itself."""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime, timedelta

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from tickwheel.domain.breaker import BreakerState
from tickwheel.domain.clock import Clock, store_now
from tickwheel.domain.pauses import TENANT_WIDE
from tickwheel.domain.rate_limits import EPSILON
from tickwheel.domain.states import TERMINAL
from tickwheel.engine.service import Service
from tickwheel.engine.worker import ALIVE_WITHIN
from tickwheel.observability.metrics import Metrics, definition_label
from tickwheel.store.protocol import Store

FINISHED_WINDOW = timedelta(minutes=5)
"""Terminal executions are counted within this window only: counting all of them would walk a
table that grows with history, and a refresh must stay cheap."""
_TERMINAL = frozenset(str(s) for s in TERMINAL)


async def refresh_queue_gauges(store: Store, clock: Clock, metrics: Metrics) -> None:
    """Reads the counts (a few indexed queries) and publishes them. Raises on a database error;
    the caller decides whether that matters."""
    now = clock.now()
    counts = await store.execution_count_by_status(now - FINISHED_WINDOW)
    alive = await store.worker_count_alive(now - timedelta(seconds=ALIVE_WITHIN))
    oldest_ready = await store.execution_oldest_ready_at()
    waiting, held = await store.concurrency_counts()
    metrics.set_counts(
        {str(k): v for k, v in counts.items()}, _TERMINAL, FINISHED_WINDOW.total_seconds()
    )
    metrics.workers_alive.set(alive)
    age = (now - oldest_ready).total_seconds() if oldest_ready is not None else 0.0
    metrics.oldest_ready_age.set(max(0.0, age))
    breakers = dict(await store.circuit_breaker_counts())
    for state in BreakerState:
        metrics.breakers.labels(str(state)).set(breakers.get(state, 0))
    metrics.concurrency_waiting.set(waiting)
    metrics.concurrency_held.set(held)
    await _rate_limit_gauges(store, metrics, store_now(clock))


async def _rate_limit_gauges(store: Store, metrics: Metrics, now: datetime | None) -> None:
    buckets = await store.rate_limit_list(None, now)
    tokens: dict[str, float] = {}
    for b in buckets:
        label = (
            "(tenant)" if b.definition_uri == TENANT_WIDE else definition_label(b.definition_uri)
        )
        tokens[label] = tokens.get(label, 0.0) + b.tokens
    metrics.rate_limit_tokens.clear()
    for label, value in tokens.items():
        metrics.rate_limit_tokens.labels(label).set(value)
    metrics.rate_limit_empty.set(sum(1 for b in buckets if b.tokens < 1.0 - EPSILON))
    metrics.rate_limited_waiting.clear()
    if buckets:
        for uri, n in (await store.rate_limit_waiting()).items():
            metrics.rate_limited_waiting.labels(definition_label(uri)).inc(n)


class ScrapeMarker(Collector):
    """Registered beside the real metrics; it contributes no series and only notes when the
    registry was last collected, i.e. scraped (on the metrics server's own thread)."""

    def __init__(self) -> None:
        self.last: float | None = None

    def describe(self) -> Iterable[Metric]:
        # Defined so that registration does not call collect() and count as a scrape.
        return []

    def collect(self) -> Iterable[Metric]:
        self.last = time.monotonic()
        return []


class QueueGauges(Service):
    name = "queue-gauges"

    def __init__(
        self,
        store: Store,
        clock: Clock | None = None,
        *,
        every: float = 5.0,
        idle_after: float = 120.0,
        metrics: Metrics | None = None,
    ) -> None:
        super().__init__(clock)
        if metrics is not None:
            self.metrics = metrics
        self.store = store
        self.every = every
        self.idle_after = idle_after
        self.refreshes = 0
        self.marker = ScrapeMarker()
        self.metrics.registry.register(self.marker)

    def wanted(self) -> bool:
        """Refresh at start (so the first scrape is not all zeros) and while scrapes come."""
        if self.refreshes == 0:
            return True
        last = self.marker.last
        return last is not None and time.monotonic() - last < self.idle_after

    async def run_once(self) -> int:
        if not self.wanted():
            return 0
        await refresh_queue_gauges(self.store, self.clock, self.metrics)
        self.refreshes += 1
        return 1

    async def idle(self, did: int) -> None:
        await self.pause(self.every)

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            self.metrics.registry.unregister(self.marker)
