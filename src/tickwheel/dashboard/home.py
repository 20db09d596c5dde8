"""Sign-in, sign-out, the overview page and its live data (JSON for first paint, SSE after)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response, StreamingResponse

from tickwheel.api.deps import app_state
from tickwheel.dashboard import stats
from tickwheel.dashboard.live import Hub, workers_alive
from tickwheel.dashboard.session import (
    COOKIE,
    SIGNIN_COOKIE,
    Session,
    check_signin_token,
    set_cookie,
    sign_in,
    sign_out,
    signin_token,
)
from tickwheel.dashboard.throttle import SignInThrottle
from tickwheel.dashboard.views import (
    checked_form,
    form_of,
    render,
    safe_next,
    session_of,
)
from tickwheel.domain.errors import TooManyRequests, Unauthorized

router = APIRouter(include_in_schema=False)
Sess = Annotated[Session, Depends(session_of)]


def throttle(request: Request) -> SignInThrottle:
    found: SignInThrottle = request.app.state.dashboard_throttle
    return found


def hub(request: Request) -> Hub:
    found: Hub = request.app.state.dashboard_hub
    return found


@router.get("/dashboard/signin")
async def signin_page(request: Request) -> Response:
    return signin_form(request, None, request.query_params.get("next"))


def signin_form(
    request: Request, error: str | None, next_path: str | None, status: int = 200
) -> Response:
    """A refused key re-renders the form (200) with the reason, like any form error."""
    token = signin_token(request)
    page = render(
        request,
        "signin.html",
        None,
        status=status,
        error=error,
        signin_csrf=token,
        next=safe_next(next_path),
        auth_disabled=app_state(request).auth_disabled,
    )
    set_cookie(page, SIGNIN_COOKIE, token, request, 3600)
    return page


@router.post("/dashboard/signin")
async def signin(request: Request) -> Response:
    form = {k: v[0] for k, v in (await form_of(request)).items() if v}
    check_signin_token(request, form)
    client = request.client.host if request.client else "unknown"
    try:
        throttle(request).check(client)
    except TooManyRequests as exc:
        page = signin_form(request, exc.message, form.get("next"), status=429)
        page.headers["Retry-After"] = str(exc.retry_after)
        return page
    response = RedirectResponse(safe_next(form.get("next")), status_code=303)
    try:
        await sign_in(request, form.get("api_key", ""), response)
    except Unauthorized as exc:
        throttle(request).failed(client)
        return signin_form(request, exc.message, form.get("next"))
    response.delete_cookie(SIGNIN_COOKIE, path="/")
    return response


@router.post("/dashboard/signout")
async def signout(request: Request, session: Sess) -> Response:
    await checked_form(request, session)
    await sign_out(request, session)
    response = RedirectResponse("/dashboard/signin", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


@router.get("/")
async def overview(request: Request, session: Sess) -> Response:
    return render(request, "overview.html", session, statuses=stats.STATUSES)


@router.get("/dashboard/api/overview")
async def overview_data(request: Request, session: Sess) -> dict[str, Any]:
    """First paint of the overview (the SSE stream keeps it current afterwards)."""
    state = app_state(request)
    feed = hub(request).feed(session.principal.tenant)
    now = state.clock.now()
    snapshot = await stats.counts(feed.stats, session.principal.tenant, now)
    if feed.series is None:
        feed.series = await stats.series(feed.stats, session.principal.tenant, now)
    snapshot["series"] = feed.series
    snapshot["workersAlive"] = await workers_alive(feed.alive, now)
    return snapshot


@router.get("/dashboard/events")
async def events(request: Request, session: Sess) -> StreamingResponse:
    stream = hub(request).stream(session.principal.tenant, request.is_disconnected)
    return StreamingResponse(
        stream,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
