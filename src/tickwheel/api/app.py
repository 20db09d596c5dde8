"""The API application. A composition root: it is handed a concrete store."""

from __future__ import annotations

from fastapi import FastAPI

from tickwheel import __version__
from tickwheel.api import errors
from tickwheel.api.deps import AppState
from tickwheel.api.limits import BodyLimit
from tickwheel.api.routes import definitions, executions, health
from tickwheel.config import Settings
from tickwheel.domain.clock import Clock, SystemClock
from tickwheel.store.protocol import Store


def create_app(store: Store, settings: Settings, clock: Clock | None = None) -> FastAPI:
    app = FastAPI(
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
        auth_disabled=settings.insecure_no_auth,
        default_tenant=settings.tenant,
    )
    errors.install(app)
    for module in (health, definitions, executions):
        app.include_router(module.router)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    return app
