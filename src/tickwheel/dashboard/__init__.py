"""The dashboard: server-rendered pages at ``/`` in the API process, for people.

It sits beside ``tickwheel.api`` (an edge: render, no business rules) and reuses the API's
authentication and its in-process transport, so every page shows and every button does exactly
what the HTTP API would for the same key."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from tickwheel.dashboard import (
    catalog,
    cluster,
    cron_edit,
    executions,
    flow,
    home,
    webhooks,
    workflows,
)
from tickwheel.dashboard.live import Hub
from tickwheel.dashboard.run_feed import RunHub
from tickwheel.dashboard.session import Signer
from tickwheel.dashboard.throttle import SignInThrottle
from tickwheel.dashboard.views import HERE, install_handlers
from tickwheel.domain.clock import Clock
from tickwheel.store.session_protocol import SessionStore
from tickwheel.store.stats_protocol import StatsStore
from tickwheel.store.workflow_view_protocol import WorkflowViewStore


def install(
    app: FastAPI,
    stats: StatsStore,
    clock: Clock,
    secret: str | None,
    workflow_views: WorkflowViewStore,
    sessions: SessionStore,
) -> None:
    app.state.dashboard_signer = Signer(secret)
    app.state.dashboard_sessions = sessions
    app.state.dashboard_throttle = SignInThrottle(clock)
    # The worker registry is not per tenant: the feed reads its alive count from the main store.
    store = app.state.tickwheel.store
    app.state.dashboard_hub = Hub(stats, clock, store.worker_count_alive)
    app.state.dashboard_workflow_views = workflow_views
    app.state.dashboard_run_hub = RunHub(workflow_views)
    install_handlers(app)
    # cron_edit before catalog: its POST /cron-jobs/{ref}/edit must win over {ref}/{action}.
    for module in (home, executions, cron_edit, catalog, flow, cluster, workflows, webhooks):
        app.include_router(module.router)
    app.mount("/dashboard/static", StaticFiles(directory=HERE / "static"), name="dashboard-static")
