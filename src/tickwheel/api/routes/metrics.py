"""``GET /metrics``: Prometheus text format, without authentication like ``/healthz``.

It is meant for a scraper on the operators' network; it shows counts and timings, never an
execution's inputs, outputs or ids. Queue depth comes from the database at scrape time (all
tenants), at most every ``REFRESH_SECONDS``, so that several scrapers and the dashboard do not
multiply the counting queries."""

from __future__ import annotations

import logging
import time

from fastapi import APIRouter, Request, Response

from tickwheel.api.deps import app_state
from tickwheel.engine.queue_gauges import refresh_queue_gauges
from tickwheel.observability.metrics import CONTENT_TYPE, Metrics

router = APIRouter(tags=["health"])
log = logging.getLogger("tickwheel.api.metrics")

REFRESH_SECONDS = 5.0


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
        await refresh_queue_gauges(deps.store, deps.clock, registry)
    except Exception as exc:  # a database outage must not hide the process's own metrics
        log.warning("queue depth not refreshed: %s", exc)
        return
    state.metrics_refreshed = time.monotonic()
