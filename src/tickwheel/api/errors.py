"""The one place where errors become HTTP statuses and the JSON error body
``{"error": {"code", "message", "details"}}``. Clients never see a stack trace."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwheel.api.error_schema import document_errors
from tickwheel.domain.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    TickwheelError,
    TooManyRequests,
    Unauthorized,
    Unavailable,
)
from tickwheel.domain.jsonvalues import clean_text, readable

log = logging.getLogger("tickwheel.api")

STATUS: list[tuple[type[TickwheelError], int]] = [
    (InvalidInput, 422),
    (BadRequest, 400),
    (NotFound, 404),
    (Conflict, 409),
    (Unauthorized, 401),
    (Forbidden, 403),
    (PayloadTooLarge, 413),
    (TooManyRequests, 429),
    (Unavailable, 503),
]


def status_of(exc: TickwheelError) -> int:
    for cls, status in STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def error_response(
    status: int, code: str, message: str, details: Any = None, retry_after: int | None = None
) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    # A message or detail may quote what the client sent (a name, a path): made encodable here,
    # so that refusing a lone surrogate cannot itself fail on it.
    return JSONResponse(
        {"error": {"code": code, "message": clean_text(message), "details": readable(details)}},
        status_code=status,
        headers=headers,
    )


def domain_error_response(exc: TickwheelError) -> JSONResponse:
    """A refusal of the domain: its status, code, message and details."""
    # Both say when to come back: a client that honours Retry-After needs no backoff of its own.
    retry_after = exc.retry_after if isinstance(exc, Unavailable | TooManyRequests) else None
    return error_response(status_of(exc), exc.code, exc.message, exc.details, retry_after)


def _path(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


def install(app: FastAPI) -> None:
    document_errors(app)

    @app.exception_handler(TickwheelError)
    async def domain_error(_: Request, exc: TickwheelError) -> JSONResponse:
        return domain_error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        details = []
        for err in exc.errors():
            message = str(err.get("msg", "invalid"))
            if err.get("type") == "json_invalid":
                return error_response(400, "bad_request", "the request body is not valid JSON")
            if err.get("type") == "missing":
                message = "is required"
            elif err.get("type") == "extra_forbidden":
                message = "is not a known field"
            details.append({"path": _path(tuple(err.get("loc", ()))), "message": message})
        summary = "; ".join(f"{d['path']}: {d['message']}" for d in details)
        return error_response(422, "invalid_input", f"the request is invalid ({summary})", details)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "not_found", 405: "method_not_allowed"}
        message = str(exc.detail) if exc.detail else "error"
        if exc.status_code == 404 and message == "Not Found":
            message = "no such route"
        return error_response(exc.status_code, codes.get(exc.status_code, "error"), message)

    # Starlette's last-resort handler sends this and then re-raises, and the server then drops
    # the kept-alive connection; ServerErrors answers inside the app, so nothing is re-raised.
    app.add_exception_handler(Exception, unexpected)
    app.add_middleware(ServerErrors)


async def unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(500, "internal", "internal error; the server log has the details")


class ServerErrors:
    """Answers an exception that escaped every handler with the JSON 500, as a normal response:
    the connection stays usable. Installed innermost, so request metrics still count the 500."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            if started:
                raise  # half a response is out: only closing the connection can end it
            response = await unexpected(Request(scope), exc)
            await response(scope, receive, send)
