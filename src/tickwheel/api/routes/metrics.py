"""``GET /metrics``: Prometheus text format, without authentication like ``/healthz``.

It is meant for a scraper on the operators' network; it shows counts and timings, never an
execution's inputs, outputs or ids. Queue depth comes from the database at scrape time (all
tenants), at most every ``REFRESH_SECONDS``, so that several scrapers and the dashboard do not
multiply the counting queries."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from fastapi import APIRouter, Request, Response

from tickwheel.api.deps import app_state
from tickwheel.domain.states import TERMINAL
from tickwheel.engine.worker import ALIVE_WITHIN
from tickwheel.observability.metrics import CONTENT_TYPE, Metrics

router = APIRouter(tags=["health"])
log = logging.getLogger("tickwheel.api.metrics")

REFRESH_SECONDS = 5.0
FINISHED_WINDOW = timedelta(minutes=5)
"""Terminal executions are counted within this window only: counting all of them would walk a
table that grows with history, and a scrape must stay cheap."""
_TERMINAL = frozenset(str(s) for s in TERMINAL)


def app_metrics(request: Request) -> Metrics:
    metrics: Metrics = request.app.state.metrics
    return metrics


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    registry = app_metrics(request)
    await _refresh_counts(request, registry)
    return Response(registry.render(), media_type=CONTENT_TYPE)


async def _refresh_counts(request: Request, registry: Metrics) -> None:
    state = request.app.state
    last: float = getattr(state, "metrics_refreshed", 0.0)
    if last and time.monotonic() - last < REFRESH_SECONDS:
        return
    deps = app_state(request)
    try:
        now = deps.clock.now()
        counts = await deps.store.execution_count_by_status(now - FINISHED_WINDOW)
        alive = await deps.store.worker_count_alive(now - timedelta(seconds=ALIVE_WITHIN))
        oldest_ready = await deps.store.execution_oldest_ready_at()
    except Exception as exc:  # a database outage must not hide the process's own metrics
        log.warning("queue depth not refreshed: %s", exc)
        return
    registry.set_counts(
        {str(k): v for k, v in counts.items()}, _TERMINAL, FINISHED_WINDOW.total_seconds()
    )
    registry.workers_alive.set(alive)
    age = (now - oldest_ready).total_seconds() if oldest_ready is not None else 0.0
    registry.oldest_ready_age.set(max(0.0, age))
    state.metrics_refreshed = time.monotonic()
