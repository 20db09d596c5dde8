"""Executions, one execution, and dead letters, with their cancel and replay actions.

Every read and action goes through the in-process transport, so the dashboard obeys exactly
the API's rules: tenant scoping, guarded transitions, the same refusal messages. Buttons are
shown only where ``domain.states`` allows the transition; the store's guard still decides."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from tickwheel.dashboard.catalog import jobs_for
from tickwheel.dashboard.session import Session
from tickwheel.dashboard.views import back, checked_form, error_page, render, session_of, transport
from tickwheel.domain.definition_refs import to_uri
from tickwheel.domain.errors import BadRequest, Forbidden, NotFound, TickwheelError
from tickwheel.domain.models import ExecutionFilter, Scope
from tickwheel.domain.states import CANCELLABLE, REPLAYABLE, ExecutionStatus

router = APIRouter(prefix="/dashboard", include_in_schema=False)
Sess = Annotated[Session, Depends(session_of)]
PAGE = 50
DEAD_LETTER_SCAN = 500
FILTERS = ("status", "definition", "cron", "key", "from", "to")
CRON_CHOICES = 200
SHOWN_APART = frozenset(
    {
        "executionId", "status", "definitionUri", "definitionVersion", "attemptCount",
        "maxAttempts", "executeAt", "createdAt", "updatedAt", "startedAt", "finishedAt",
        "nextAttemptAt", "idempotencyKey", "cancelRequestedAt", "progress", "checkpoint",
        "inputs", "output", "outputReference", "error", "startBy", "deadline",
        "concurrency",
    }
)  # fmt: skip
"""The fields of an execution (its API names) that ``execution.html`` lays out in places of
their own (``updatedAt``: nowhere). Every other field is listed among the page's facts under
its API name, so a new field of an Execution shows there without a change to the page."""


def _instant(value: str, field: str) -> datetime | None:
    """``<input type=datetime-local>`` gives a naive wall time: the dashboard means UTC."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise BadRequest(f"{field}: not a date and time ({value!r})") from exc
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


def _filter(q: dict[str, str]) -> ExecutionFilter:
    status = q.get("status", "")
    if status and status not in ExecutionStatus.__members__:
        raise BadRequest(f"status: unknown status {status!r}")
    definition = q.get("definition", "")
    cron = q.get("cron", "")
    if cron:
        try:
            cron = str(uuid.UUID(cron))
        except ValueError as exc:
            raise BadRequest(f"cron: not a cron job id ({cron!r})") from exc
    return ExecutionFilter(
        statuses=(ExecutionStatus(status),) if status else (),
        definition_uri=to_uri(definition) if definition else None,
        idempotency_key=q.get("key") or None,
        # The Cron Service keys each occurrence's execution ``cron:<cronJobId>:<occurrence>``.
        idempotency_key_prefix=f"cron:{cron}:" if cron else None,
        execute_from=_instant(q.get("from", ""), "from"),
        execute_to=_instant(q.get("to", ""), "to"),
    )


@router.get("/executions")
async def execution_list(request: Request, session: Sess) -> Response:
    q = {k: request.query_params.get(k, "").strip() for k in (*FILTERS, "cursor")}
    t = transport(request, session)
    try:
        page = await t.list(_filter(q), q["cursor"] or None, PAGE)
    except BadRequest as exc:
        return error_page(request, session, exc, 400)
    kept = {k: q[k] for k in FILTERS if q[k]}
    next_url = None
    if page["nextCursor"]:
        next_url = "?" + urlencode({**kept, "cursor": page["nextCursor"]})
    definitions = [d["name"] for d in await t.definition_list()]
    jobs = jobs_for(request, session)
    cron_jobs = await jobs.cron.cron_job_list(jobs.tenant, None, CRON_CHOICES)
    return render(
        request,
        "executions.html",
        session,
        items=page["items"],
        q=q,
        next_url=next_url,
        first_url="?" + urlencode(kept) if q["cursor"] else None,
        statuses=[str(s) for s in ExecutionStatus],
        definitions=definitions,
        cron_jobs=[(str(j.cron_job_id), j.name) for j in cron_jobs],
    )


def _parse_id(raw: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError as exc:
        raise NotFound(f"no execution {raw}") from exc


@router.get("/executions/{execution_id}")
async def execution_page(execution_id: str, request: Request, session: Sess) -> Response:
    t = transport(request, session)
    try:
        eid = _parse_id(execution_id)
        execution = await t.get(eid)
        attempts = await t.attempts(eid)
        history = await t.history(eid)
        output = (await t.output(eid))["output"] if execution["outputReference"] else None
    except NotFound as exc:
        return error_page(request, session, exc, 404)
    status = ExecutionStatus(execution["status"])
    can_act = session.principal.scope.allows(Scope.SUBMIT)
    return render(
        request,
        "execution.html",
        session,
        e=execution,
        facts=[(k, v) for k, v in execution.items() if k not in SHOWN_APART],
        output=output if execution["outputReference"] else execution["output"],
        attempts=attempts,
        history=history,
        # A RUNNING one is asked to stop (once: the button goes when the request is recorded).
        can_cancel=can_act
        and (
            status in CANCELLABLE
            or (status is ExecutionStatus.RUNNING and not execution.get("cancelRequestedAt"))
        ),
        can_replay=can_act and status in REPLAYABLE,
    )


async def _act(request: Request, session: Session, execution_id: str, action: str) -> Response:
    await checked_form(request, session)
    here = f"/dashboard/executions/{execution_id}"
    try:
        session.principal.require(Scope.SUBMIT)
        t = transport(request, session)
        eid = _parse_id(execution_id)
        if action == "cancel":
            answer = await t.cancel(eid)
            if answer["status"] == ExecutionStatus.RUNNING:
                return back(here, "Cancel requested: its worker stops it at its next heartbeat.")
        else:
            await t.replay(eid)
    except Forbidden as exc:
        return error_page(request, session, exc, 403)
    except NotFound as exc:
        return error_page(request, session, exc, 404)
    except TickwheelError as exc:
        return back(here, exc.message)
    return back(here, "Cancelled." if action == "cancel" else "Replayed: the execution is READY.")


@router.post("/executions/{execution_id}/cancel")
async def cancel(execution_id: str, request: Request, session: Sess) -> Response:
    return await _act(request, session, execution_id, "cancel")


@router.post("/executions/{execution_id}/replay")
async def replay(execution_id: str, request: Request, session: Sess) -> Response:
    return await _act(request, session, execution_id, "replay")


def _error_kind(error: dict[str, Any] | None) -> tuple[str, str]:
    if not error:
        return ("unknown", "")
    kind = str(error.get("kind") or error.get("type") or "error")
    return (kind, str(error.get("message", ""))[:300])


@router.get("/dead-letters")
async def dead_letters(request: Request, session: Sess) -> Response:
    """FAILED executions (newest ``DEAD_LETTER_SCAN``), grouped by definition and error."""
    t = transport(request, session)
    flt = ExecutionFilter(statuses=(ExecutionStatus.FAILED,))
    page = await t.list(flt, None, DEAD_LETTER_SCAN)
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for item in page["items"]:
        kind, message = _error_kind(item["error"])
        groups.setdefault((item["definitionUri"], kind, message), []).append(item)
    ordered = sorted(groups.items(), key=lambda g: -len(g[1]))
    return render(
        request,
        "dead_letters.html",
        session,
        groups=[
            {"definition": k[0], "kind": k[1], "message": k[2], "items": v} for k, v in ordered
        ],
        truncated=page["nextCursor"] is not None,
        scan=DEAD_LETTER_SCAN,
        can_act=session.principal.scope.allows(Scope.SUBMIT),
    )


@router.post("/dead-letters/replay")
async def replay_selected(request: Request, session: Sess) -> Response:
    form = await checked_form(request, session)
    try:
        session.principal.require(Scope.SUBMIT)
    except Forbidden as exc:
        return error_page(request, session, exc, 403)
    t = transport(request, session)
    ids = form.get("id", [])[:DEAD_LETTER_SCAN]
    done, refused = 0, []
    for raw in ids:
        try:
            await t.replay(_parse_id(raw))
            done += 1
        except TickwheelError as exc:
            refused.append(f"…{raw[-12:]}: {exc.message}")
    notice = f"Replayed {done} of {len(ids)}." + (
        f" Refused: {'; '.join(refused[:3])}" if refused else ""
    )
    return back("/dashboard/dead-letters", notice)
