"""Live updates: one aggregation loop per tenant, shared by every connected browser.

A thousand executions a second must not become a thousand DOM updates a second, nor one store
query per open tab per second. So each tenant has one ``Feed``: while at least one client
listens, it runs the counts query at most once per ``TICK`` (longer if the query itself is slow:
the pause is never shorter than three times the last query), computes rates from the difference
between snapshots, and hands the newest snapshot to each client through a one-slot mailbox
(latest wins, nothing queues up behind a slow client). The heavier per-minute series is
refreshed every ``SERIES_EVERY`` seconds in the same loop."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from tickwheel.dashboard import stats
from tickwheel.domain.clock import Clock
from tickwheel.engine.worker import ALIVE_WITHIN
from tickwheel.store.stats_protocol import StatsStore

log = logging.getLogger("tickwheel.dashboard")
TICK = 1.0
SERIES_EVERY = 10.0
STREAM_LIFETIME = 20.0
"""A stream ends after this long and the browser's EventSource reconnects on its own: a server
shutting down then never waits long for open dashboards."""
FINISHED = ("SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED")
AliveCount = Callable[[datetime], Awaitable[int]]
"""The worker registry's alive count (workers heard from since the instant given)."""


async def workers_alive(count: AliveCount | None, now: datetime) -> int | None:
    return await count(now - timedelta(seconds=ALIVE_WITHIN)) if count is not None else None


class Mailbox:
    def __init__(self) -> None:
        self.latest: dict[str, Any] | None = None
        self.changed = asyncio.Event()

    def put(self, snapshot: dict[str, Any]) -> None:
        self.latest = snapshot
        self.changed.set()

    async def get(self, timeout: float) -> dict[str, Any] | None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.changed.wait(), timeout)
        self.changed.clear()
        snapshot, self.latest = self.latest, None
        return snapshot


class Feed:
    def __init__(
        self, stats_store: StatsStore, tenant: str, clock: Clock, alive: AliveCount | None = None
    ) -> None:
        self.stats = stats_store
        self.alive = alive
        self.workers_alive: int | None = None
        self.tenant = tenant
        self.clock = clock
        self.clients: set[Mailbox] = set()
        self.task: asyncio.Task[None] | None = None
        self.last: dict[str, Any] | None = None
        self.series: dict[str, Any] | None = None
        self._series_at = 0.0
        self.queries = 0

    def subscribe(self) -> Mailbox:
        box = Mailbox()
        if self.last is not None:
            box.put(self.last)
        self.clients.add(box)
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._run(), name=f"dashboard-feed-{self.tenant}")
        return box

    def unsubscribe(self, box: Mailbox) -> None:
        self.clients.discard(box)

    async def _run(self) -> None:
        previous: tuple[float, int] | None = None
        while self.clients:
            began = time.monotonic()
            try:
                snapshot = await stats.counts(self.stats, self.tenant, self.clock.now())
                self.queries += 1
                finished = sum(snapshot["counts"][s] for s in FINISHED)
                if previous is not None and began > previous[0]:
                    rate = (finished - previous[1]) / (began - previous[0])
                    snapshot["finishedPerSecond"] = round(max(0.0, rate), 2)
                previous = (began, finished)
                if began - self._series_at >= SERIES_EVERY:
                    # The heavier reads ride along with the series, not with every tick.
                    self.series = await stats.series(self.stats, self.tenant, self.clock.now())
                    self.workers_alive = await workers_alive(self.alive, self.clock.now())
                    self._series_at = began
                    snapshot["series"] = self.series
                snapshot["workersAlive"] = self.workers_alive
                self.last = snapshot
                for box in list(self.clients):
                    box.put(snapshot)
            except Exception:  # a failed tick must not end the feed for every client
                log.exception("dashboard feed for tenant %s failed a tick", self.tenant)
            spent = time.monotonic() - began
            await asyncio.sleep(max(TICK - spent, 3 * spent, 0.05))


class Hub:
    def __init__(
        self, stats_store: StatsStore, clock: Clock, alive: AliveCount | None = None
    ) -> None:
        self.stats = stats_store
        self.clock = clock
        self.alive = alive
        self.feeds: dict[str, Feed] = {}

    def feed(self, tenant: str) -> Feed:
        if tenant not in self.feeds:
            self.feeds[tenant] = Feed(self.stats, tenant, self.clock, self.alive)
        return self.feeds[tenant]

    async def stream(self, tenant: str, is_disconnected: Any) -> AsyncIterator[str]:
        """Server-Sent Events: ``snapshot`` events, a comment now and then as a keep-alive."""
        feed = self.feed(tenant)
        box = feed.subscribe()
        deadline = time.monotonic() + STREAM_LIFETIME
        try:
            yield "retry: 1000\n\n"
            if feed.series is not None and feed.last is not None:
                yield _event({**feed.last, "series": feed.series})
            while time.monotonic() < deadline:
                if await is_disconnected():
                    return
                snapshot = await box.get(timeout=5.0)
                yield _event(snapshot) if snapshot is not None else ": keep-alive\n\n"
        finally:
            feed.unsubscribe(box)


def _event(snapshot: dict[str, Any]) -> str:
    return f"event: snapshot\ndata: {json.dumps(snapshot, separators=(',', ':'))}\n\n"
