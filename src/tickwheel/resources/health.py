"""Liveness and readiness answers."""

from __future__ import annotations

from typing import Literal

from tickwheel.resources.base import Resource, omitted_when_none


class Health(Resource):
    status: Literal["ok"]


class Readiness(Resource):
    """``ok`` with the database's dialect, or ``unavailable`` (a 503) with the reason: the
    database cannot be reached, or migrations are pending."""

    status: Literal["ok", "unavailable"]
    database: str | None = omitted_when_none()
    reason: str | None = omitted_when_none()
    pending_migrations: list[str] | None = omitted_when_none()
