"""Definitions (versions side by side) and cron jobs (next fire times, last outcome, pause and
resume, the preview of an expression while typing).

Cron jobs go through ``tickwheel.cron.jobs.CronJobs``, the same object behind
``/v1/cron-jobs``, so pausing here writes the same audit row as pausing through the API. The
preview endpoint is the session-authenticated twin of ``GET /v1/cron/preview``: page script
never holds an API key, so it cannot call ``/v1`` itself."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response

from tickwheel.api.deps import app_state
from tickwheel.cron.jobs import CronJobs
from tickwheel.dashboard import flow
from tickwheel.dashboard.session import Session
from tickwheel.dashboard.views import back, checked_form, error_page, render, session_of, transport
from tickwheel.domain.errors import Forbidden, NotFound, TickwheelError
from tickwheel.domain.models import Scope

router = APIRouter(prefix="/dashboard", include_in_schema=False)
Sess = Annotated[Session, Depends(session_of)]
CRON_PAGE = 100


@router.get("/definitions")
async def definitions(request: Request, session: Sess) -> Response:
    latest = await transport(request, session).definition_list()
    states = await flow.list_states(request, session)
    return render(request, "definitions.html", session, definitions=latest, **states)


@router.get("/definitions/{name}")
async def definition_versions(name: str, request: Request, session: Sess) -> Response:
    try:
        versions = await transport(request, session).definition_versions(name)
    except NotFound as exc:
        return error_page(request, session, exc, 404)
    fields = sorted({k for v in versions for k in v if k not in ("name", "uri")})
    differing = {f for f in fields if len({repr(v.get(f)) for v in versions}) > 1}
    return render(
        request,
        "definition.html",
        session,
        name=name,
        versions=sorted(versions, key=lambda v: -int(v["version"])),
        fields=fields,
        differing=differing,
        **await flow.definition_panel(request, session, name),
    )


def jobs_for(request: Request, session: Session) -> CronJobs:
    state = app_state(request)
    key = session.principal.key_id
    actor = f"dashboard key:{key}" if key else "dashboard (insecure-no-auth)"
    return CronJobs(state.cron, state.store, session.principal.tenant, actor, state.clock)


@router.get("/cron-jobs")
async def cron_jobs(request: Request, session: Sess) -> Response:
    jobs = jobs_for(request, session)
    after = request.query_params.get("after") or None
    stored = await jobs.cron.cron_job_list(jobs.tenant, after, CRON_PAGE + 1)
    rows: list[dict[str, Any]] = []
    for job in stored[:CRON_PAGE]:
        wire = jobs.render(job)
        history = await jobs.cron_history(str(job.cron_job_id), None, 1)
        wire["lastRecord"] = history["items"][0] if history["items"] else None
        rows.append(wire)
    more = len(stored) > CRON_PAGE
    return render(
        request,
        "cron_jobs.html",
        session,
        jobs=rows,
        next_after=stored[CRON_PAGE - 1].name if more else None,
        can_act=session.principal.scope.allows(Scope.SUBMIT),
    )


@router.post("/cron-jobs/{ref}/{action}")
async def cron_action(ref: str, action: str, request: Request, session: Sess) -> Response:
    form = await checked_form(request, session)
    if action not in ("pause", "resume"):
        return error_page(request, session, NotFound(f"no cron action {action!r}"), 404)
    try:
        session.principal.require(Scope.SUBMIT)
        jobs = jobs_for(request, session)
        if action == "pause":
            job = await jobs.cron_pause(ref)
        else:
            job = await jobs.cron_resume(ref, form.get("catch_up", [""])[0] == "on")
    except Forbidden as exc:
        return error_page(request, session, exc, 403)
    except TickwheelError as exc:
        return back("/dashboard/cron-jobs", exc.message)
    return back("/dashboard/cron-jobs", f"{job['name']}: {job['status']}")


@router.get("/api/cron-preview")
async def cron_preview(
    request: Request,
    session: Sess,
    expression: Annotated[str, Query(max_length=200)],
    timezone: Annotated[str, Query(max_length=64)] = "UTC",
    count: Annotated[int, Query(ge=1, le=20)] = 5,
) -> Response:
    """JSON like ``GET /v1/cron/preview``; a bad expression is a 422 with the reason."""
    jobs = jobs_for(request, session)
    policy: dict[str, str | None] = {"nonexistent": None, "ambiguous": None}
    after: datetime | None = None
    try:
        wire = await jobs.cron_preview(expression, timezone, after, count, policy)
    except TickwheelError as exc:
        return JSONResponse({"error": {"code": exc.code, "message": exc.message}}, 422)
    return JSONResponse(wire)
