"""What every dashboard page shares: templates, the session dependency, form parsing, errors.

Pages are plain server-rendered HTML; Jinja2 autoescapes everything, so user data (inputs,
error messages, idempotency keys) can never become markup."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from tickwheel.api.deps import app_state
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.dashboard.session import CsrfRejected, Session, SignedOut, check_csrf, current
from tickwheel.domain.errors import TickwheelError

HERE = Path(__file__).parent
MAX_FORM_BYTES = 64 * 1024

templates = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _when(value: str | None) -> str:
    """ISO instants shown to the second, in UTC (the title attribute keeps the full value)."""
    if not value:
        return "—"
    try:
        return datetime.fromisoformat(value).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return value


templates.filters["when"] = _when
templates.filters["pretty"] = lambda v: json.dumps(v, indent=2, sort_keys=True, default=str)


def render(
    request: Request, template: str, session: Session | None, status: int = 200, **ctx: Any
) -> HTMLResponse:
    html = templates.get_template(template).render(
        request=request,
        session=session,
        csrf=session.csrf if session else "",
        notice=request.query_params.get("notice"),
        path=request.url.path,
        **ctx,
    )
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


SECURITY_HEADERS = {
    # Our own scripts and styles only; no inline script, no framing (clickjacking).
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


async def session_of(request: Request) -> Session:
    """FastAPI dependency: the signed-in session (``SignedOut`` redirects to sign-in)."""
    return await current(request)


async def form_of(request: Request) -> dict[str, list[str]]:
    """An urlencoded form body, parsed with the standard library (no multipart needed)."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise CsrfRejected
    return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)


async def checked_form(request: Request, session: Session) -> dict[str, list[str]]:
    """The form of a POST action, after its CSRF token matched the session's."""
    form = await form_of(request)
    check_csrf(session, {k: v[0] for k, v in form.items() if v})
    return form


def transport(request: Request, session: Session) -> InProcessTransport:
    """The API's own rules (validation, guards, tenant scoping) for this session's tenant."""
    state = app_state(request)
    return InProcessTransport(
        state.store, session.principal.tenant, state.clock, state.limits, state.run_policy
    )


def back(to: str, notice: str) -> RedirectResponse:
    """Post/redirect/get: an action answers with a redirect carrying a one-line notice."""
    sep = "&" if "?" in to else "?"
    return RedirectResponse(f"{to}{sep}notice={quote(notice)}", status_code=303)


def safe_next(value: str | None) -> str:
    """Only local paths: the sign-in page must not become an open redirect."""
    if value and value.startswith("/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/"


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(SignedOut)
    async def signed_out(request: Request, _: SignedOut) -> Response:
        if request.url.path.startswith("/dashboard/api/") or request.url.path.endswith("/events"):
            return JSONResponse(
                {"error": {"code": "unauthorized", "message": "sign in first", "details": None}},
                status_code=401,
            )
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/dashboard/signin?next={quote(target)}", status_code=303)

    @app.exception_handler(CsrfRejected)
    async def csrf_rejected(request: Request, _: CsrfRejected) -> Response:
        return render(
            request,
            "error.html",
            None,
            status=403,
            title="Request refused",
            message="The form's security token was missing or stale. Reload the page and retry.",
        )


def error_page(request: Request, session: Session, exc: TickwheelError, status: int) -> Response:
    return render(request, "error.html", session, status=status, title="Error", message=exc.message)
