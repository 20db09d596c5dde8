"""Workflows: the definitions, a list of runs, and a run's page with its DAG drawn live.

Reads come from ``WorkflowViewStore`` (the dashboard's read-only views); the run page's cancel
and retry buttons go through ``WorkflowRuns``, built exactly as ``/v1/workflow-runs`` builds it
for the session's principal, so the dashboard obeys the API's rules and guards. Buttons are
shown only where the run's status allows the action; the store's guard still decides."""

from __future__ import annotations

import uuid
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from tickwheel.api.deps import app_state
from tickwheel.api.routes.workflows import definitions_for, runs_for
from tickwheel.client.wire import decode_cursor, encode_cursor
from tickwheel.dashboard import dag
from tickwheel.dashboard.run_feed import RunHub, snapshot_of
from tickwheel.dashboard.session import Session
from tickwheel.dashboard.views import back, checked_form, error_page, render, session_of
from tickwheel.domain.errors import BadRequest, Forbidden, NotFound, TickwheelError
from tickwheel.domain.models import Scope
from tickwheel.domain.workflow_runs import RunStatus
from tickwheel.domain.workflows import workflow_from_document
from tickwheel.store.workflow_view_protocol import WorkflowViewStore

router = APIRouter(prefix="/dashboard", include_in_schema=False)
Sess = Annotated[Session, Depends(session_of)]
PAGE = 50
RUN_STATUSES = [str(s) for s in RunStatus]


def views(request: Request) -> WorkflowViewStore:
    found: WorkflowViewStore = request.app.state.dashboard_workflow_views
    return found


def run_hub(request: Request) -> RunHub:
    found: RunHub = request.app.state.dashboard_run_hub
    return found


@router.get("/workflows")
async def workflow_list(request: Request, session: Sess) -> Response:
    tenant = session.principal.tenant
    counts = {v.name: v for v in await views(request).workflow_view_versions(tenant)}
    rows = []
    for latest in await definitions_for(request, tenant).list():
        v = counts.get(latest["name"])
        rows.append(
            {
                "name": latest["name"],
                "description": latest.get("description") or "",
                "version": latest["version"],
                "versions": v.versions if v else 1,
                "first": v.first_version if v else latest["version"],
                "tasks": len(latest.get("tasks") or []),
            }
        )
    return render(request, "workflows.html", session, workflows=rows)


def _run_filter(q: dict[str, str]) -> tuple[str | None, RunStatus | None, uuid.UUID | None]:
    if len(q["workflow"]) > 128:
        raise BadRequest("workflow: a workflow name has at most 128 characters")
    status = q["status"]
    if status and status not in RunStatus.__members__:
        raise BadRequest(f"status: unknown run status {status!r}")
    before = decode_cursor(q["cursor"]) if q["cursor"] else None
    return q["workflow"] or None, RunStatus(status) if status else None, before


@router.get("/workflows/runs")
async def run_list(request: Request, session: Sess) -> Response:
    q = {k: request.query_params.get(k, "").strip() for k in ("workflow", "status", "cursor")}
    try:
        workflow, status, before = _run_filter(q)
    except BadRequest as exc:
        return error_page(request, session, exc, 400)
    store = views(request)
    tenant = session.principal.tenant
    page = await store.workflow_view_runs(tenant, workflow, status, before, PAGE + 1)
    runs, more = page[:PAGE], len(page) > PAGE
    progress: dict[uuid.UUID, dict[str, int]] = {r.workflow_run_id: {} for r in runs}
    for c in await store.workflow_view_task_counts([r.workflow_run_id for r in runs]):
        progress[c.workflow_run_id][str(c.status)] = c.count
    kept = {k: q[k] for k in ("workflow", "status") if q[k]}
    return render(
        request,
        "workflow_runs.html",
        session,
        runs=[{"run": r, "tasks": progress[r.workflow_run_id]} for r in runs],
        q=q,
        statuses=RUN_STATUSES,
        names=[v.name for v in await store.workflow_view_versions(tenant)],
        next_url="?" + urlencode({**kept, "cursor": encode_cursor(runs[-1].workflow_run_id)})
        if more
        else None,
        first_url="?" + urlencode(kept) if q["cursor"] else None,
    )


def _parse_id(raw: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError as exc:
        raise NotFound(f"no workflow run {raw}") from exc


@router.get("/workflows/runs/{run_id}")
async def run_page(run_id: str, request: Request, session: Sess) -> Response:
    state = app_state(request)
    tenant = session.principal.tenant
    try:
        rid = _parse_id(run_id)
        run = await state.workflows.workflow_run_get(tenant, rid)
        states = await views(request).workflow_view_task_states(tenant, rid)
        if run is None or states is None:
            raise NotFound(f"no workflow run {run_id}")
        stored = await definitions_for(request, tenant).stored(
            run.workflow_name, run.workflow_version
        )
    except NotFound as exc:
        return error_page(request, session, exc, 404)
    workflow = workflow_from_document(stored.document)
    graph = dag.layout({t.name: t.depends_on for t in workflow.tasks})
    snapshot = snapshot_of(states)
    by_name = {t["name"]: t for t in snapshot["tasks"]}
    # Every task gets its task run with the run; a missing one still draws (as PENDING) rather
    # than failing the page.
    for t in workflow.tasks:
        by_name.setdefault(
            t.name,
            {
                "name": t.name,
                "state": "PENDING",
                "executionId": None,
                "attempts": None,
                "updatedAt": None,
            },
        )
    can_act = session.principal.scope.allows(Scope.SUBMIT)
    return render(
        request,
        "workflow_run.html",
        session,
        run=run,
        snap=snapshot,
        states=by_name,
        graph=graph,
        node_w=dag.NODE_W,
        node_h=dag.NODE_H,
        # The table (the graph's text alternative) lists tasks in the workflow's own order.
        tasks=[
            {**by_name[t.name], "dependsOn": t.depends_on, "definition": t.definition}
            for t in workflow.tasks
        ],
        can_act=can_act,
    )


@router.get("/workflows/runs/{run_id}/events")
async def run_events(run_id: str, request: Request, session: Sess) -> Response:
    """The run's live snapshots (Server-Sent Events); 404 for a run the tenant cannot see."""
    try:
        rid = _parse_id(run_id)
    except NotFound as exc:
        return JSONResponse({"error": {"code": "not_found", "message": exc.message}}, 404)
    tenant = session.principal.tenant
    if await app_state(request).workflows.workflow_run_get(tenant, rid) is None:
        message = f"no workflow run {run_id}"
        return JSONResponse({"error": {"code": "not_found", "message": message}}, 404)
    hub = run_hub(request)
    feed = hub.feed(tenant, rid)
    if feed is None:
        message = "too many runs are being watched live; reload the page later"
        return JSONResponse({"error": {"code": "busy", "message": message}}, 503)
    return StreamingResponse(
        hub.stream(feed, request.is_disconnected),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _act(request: Request, session: Session, run_id: str, action: str) -> Response:
    await checked_form(request, session)
    here = f"/dashboard/workflows/runs/{run_id}"
    try:
        session.principal.require(Scope.SUBMIT)
        rid = _parse_id(run_id)
        runs = runs_for(request, session.principal)
        wire: dict[str, Any] = await (runs.cancel(rid) if action == "cancel" else runs.retry(rid))
    except Forbidden as exc:
        return error_page(request, session, exc, 403)
    except NotFound as exc:
        return error_page(request, session, exc, 404)
    except TickwheelError as exc:
        return back(here, exc.message)
    if action == "cancel":
        return back(here, f"Cancelled: the run is {wire['status']}.")
    return back(here, f"Retried (retry {wire['retryCount']}): the run is {wire['status']}.")


@router.post("/workflows/runs/{run_id}/cancel")
async def cancel(run_id: str, request: Request, session: Sess) -> Response:
    return await _act(request, session, run_id, "cancel")


@router.post("/workflows/runs/{run_id}/retry")
async def retry(run_id: str, request: Request, session: Sess) -> Response:
    return await _act(request, session, run_id, "retry")
