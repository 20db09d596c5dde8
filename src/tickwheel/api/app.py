"""The API application. A composition root: it is handed a concrete store."""

from __future__ import annotations

from fastapi import FastAPI

from tickwheel import __version__
from tickwheel.api import errors
from tickwheel.api.deps import AppState
from tickwheel.api.hosts import LoopbackHostOnly
from tickwheel.api.hot_front import HotApp, HotFront
from tickwheel.api.limits import BodyLimit
from tickwheel.api.request_metrics import RequestMetrics
from tickwheel.api.routes import (
    cron,
    cron_manual,
    definitions,
    executions,
    flow,
    health,
    metrics,
    webhooks,
    workflows,
)
from tickwheel.api.trace_context import IncomingTrace
from tickwheel.config import Settings
from tickwheel.dashboard import install as install_dashboard
from tickwheel.domain.clock import Clock, SystemClock
from tickwheel.observability.metrics import process_metrics
from tickwheel.store.factory import (
    ReadStores,
    cron_store_for,
    session_store_for,
    stats_store_for,
    webhook_store_for,
    workflow_store_for,
    workflow_view_store_for,
)
from tickwheel.store.protocol import Store


def create_app(
    store: Store,
    settings: Settings,
    clock: Clock | None = None,
    reads: ReadStores | None = None,
    *,
    hot_routes: bool = True,
) -> FastAPI:
    """The API and the dashboard on ``store``; the dashboard's heavy reads on ``reads`` (a
    standby, ``read_database_url``) when given. ``hot_routes=False``: the busiest routes
    through the middleware stack and FastAPI's routes like any other (``api/hot_front.py``;
    the tests compare the two)."""
    app = HotApp(
        title="tickwheel",
        version=__version__,
        description="Run jobs at a time, after a delay or on a schedule, at least once.",
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.tickwheel = AppState(
        store=store,
        clock=clock or SystemClock(),
        limits=settings.submit_limits(),
        run_policy=settings.run_policy(),
        auth_disabled=settings.insecure_no_auth,
        default_tenant=settings.tenant,
        cron=cron_store_for(store),
        workflows=workflow_store_for(store),
    )
    errors.install(app)
    # The process's registry: the engine services of this process record into it too.
    app.state.metrics = process_metrics()
    app.state.webhooks = webhook_store_for(store)
    routes = (
        health,
        metrics,
        flow,
        definitions,
        executions,
        cron_manual,
        cron,
        workflows,
        webhooks,
    )
    for module in routes:
        app.include_router(module.router)
    state = app.state.tickwheel
    install_dashboard(
        app,
        reads.stats if reads else stats_store_for(store),
        state.clock,
        settings.dashboard_secret,
        reads.workflow_views if reads else workflow_view_store_for(store),
        session_store_for(store),
    )
    # Innermost: only the requests let through continue their caller's trace.
    app.add_middleware(IncomingTrace)
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.max_body_bytes,
        larger={"/v1/cron-jobs/apply": settings.max_apply_body_bytes},
    )
    if settings.insecure_no_auth:
        # Outside the body limit: a request for another host is refused before anything else.
        app.add_middleware(LoopbackHostOnly)
    # Added last, so outermost: it times every request, including those refused by BodyLimit.
    app.add_middleware(RequestMetrics, metrics=app.state.metrics)
    if hot_routes:
        # In front of all of the above, doing their work for the busiest routes (hot_front.py).
        app.hot = HotFront(
            app.state.metrics.http_duration, settings.max_body_bytes, settings.insecure_no_auth
        )
    return app
