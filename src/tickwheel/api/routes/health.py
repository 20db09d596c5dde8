"""Liveness and readiness, without authentication (load balancers and orchestrators call them)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from tickwheel.api.deps import app_state
from tickwheel.resources.health import Health, Readiness

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "not ready: the reason says why"}},
)
async def readyz(request: Request) -> dict[str, Any] | JSONResponse:
    store = app_state(request).store
    try:
        await store.ping()
        pending = await store.migrations_pending()
    except Exception as exc:  # any failure to reach the database means "not ready"
        return JSONResponse({"status": "unavailable", "reason": type(exc).__name__}, 503)
    if pending:
        return JSONResponse({"status": "unavailable", "pendingMigrations": pending}, 503)
    return {"status": "ok", "database": store.dialect}
