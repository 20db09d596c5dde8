"""Editing a cron job: expression, timezone, inputs and policies, through ``CronJobs`` exactly
like ``PATCH /v1/cron-jobs/{ref}``, guarded by the job's ``version`` (a job changed since the
form was read is refused with 409 and the form shown again with the reason)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from tickwheel.dashboard.catalog import jobs_for
from tickwheel.dashboard.session import Session
from tickwheel.dashboard.views import back, checked_form, error_page, render, session_of
from tickwheel.domain.cron_jobs import MisfirePolicy, OverlapPolicy
from tickwheel.domain.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    TickwheelError,
)
from tickwheel.domain.models import Scope

router = APIRouter(prefix="/dashboard", include_in_schema=False)
Sess = Annotated[Session, Depends(session_of)]
FIELDS = ("expression", "timezone", "inputs", "misfirePolicy", "overlapPolicy")
NUMBERS = ("maxCatchUp", "jitter", "version")


def _form_values(job: dict[str, Any]) -> dict[str, str]:
    values = {k: str(job.get(k, "")) for k in (*FIELDS, *NUMBERS)}
    values["inputs"] = json.dumps(job.get("inputs") or {}, indent=2, sort_keys=True)
    return values


def _document(values: dict[str, str]) -> dict[str, Any]:
    """The PATCH document of a submitted form; bad JSON or numbers are a 400 with the field."""
    doc: dict[str, Any] = {k: values[k] for k in FIELDS if k != "inputs"}
    try:
        doc["inputs"] = json.loads(values["inputs"] or "{}")
    except json.JSONDecodeError as exc:
        raise BadRequest(f"inputs: not JSON ({exc.msg} at line {exc.lineno})") from exc
    for key in NUMBERS:
        try:
            doc[key] = int(values[key])
        except ValueError as exc:
            raise BadRequest(f"{key}: not a whole number ({values[key]!r})") from exc
    return doc


def _page(
    request: Request,
    session: Session,
    job: dict[str, Any],
    values: dict[str, str],
    error: str | None = None,
    status: int = 200,
) -> Response:
    return render(
        request,
        "cron_edit.html",
        session,
        status=status,
        job=job,
        v=values,
        error=error,
        misfire=[str(p) for p in MisfirePolicy],
        overlap=[str(p) for p in OverlapPolicy],
    )


@router.get("/cron-jobs/{ref}/edit")
async def edit_form(ref: str, request: Request, session: Sess) -> Response:
    try:
        session.principal.require(Scope.SUBMIT)
        job = await jobs_for(request, session).cron_get(ref)
    except Forbidden as exc:
        return error_page(request, session, exc, 403)
    except NotFound as exc:
        return error_page(request, session, exc, 404)
    return _page(request, session, job, _form_values(job))


@router.post("/cron-jobs/{ref}/edit")
async def edit(ref: str, request: Request, session: Sess) -> Response:
    form = await checked_form(request, session)
    values = {k: form.get(k, [""])[0].strip() for k in (*FIELDS, *NUMBERS)}
    jobs = jobs_for(request, session)
    try:
        session.principal.require(Scope.SUBMIT)
        job = await jobs.cron_get(ref)
    except Forbidden as exc:
        return error_page(request, session, exc, 403)
    except NotFound as exc:
        return error_page(request, session, exc, 404)
    try:
        updated = await jobs.cron_update(ref, _document(values))
    except TickwheelError as exc:
        status = 409 if isinstance(exc, Conflict) else 400
        message = exc.message
        if isinstance(exc, InvalidInput) and exc.errors:
            message += ": " + "; ".join(f"{e.path} {e.message}" for e in exc.errors)
        return _page(request, session, job, values, message, status)
    return back("/dashboard/cron-jobs", f"{updated['name']}: saved (version {updated['version']})")
