"""A pure ASGI middleware that refuses request bodies over a limit with 413 — checked on the
declared length and again while streaming, so a lying or chunked client cannot get past it.

It also refuses, with a 422, a URL whose path or query holds a NUL character: no name, key or
value of tickwheel may hold one (PostgreSQL cannot store it), and refusing it here means no
route has to remember to."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwheel.domain.errors import PayloadTooLarge


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int, larger: dict[str, int] | None = None) -> None:
        """``larger``: paths allowed bigger bodies (``cron apply`` of 100,000 jobs)."""
        self.app = app
        self.default_bytes = max_bytes
        self.larger = larger or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if "\x00" in scope["path"] or b"%00" in scope.get("query_string", b""):
            where = "path" if "\x00" in scope["path"] else "query"
            message = f"the URL's {where} holds a NUL character (%00), which no value may hold"
            await _answer(
                send, 422, "invalid_input", message, [{"path": where, "message": message}]
            )
            return
        limit = self.larger.get(scope.get("path", ""), self.default_bytes)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _refuse(send, limit)
            return
        received = 0
        refused = False

        async def limited_receive() -> Message:
            # The 413 goes out from here, the moment the limit is passed: whatever route reads
            # the body (and whatever it makes of the error raised next: FastAPI's body parsing
            # turns any error into a 400) answers the same. Later sends are dropped.
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit and not refused:
                    refused = True
                    await _refuse(send, limit)
                if refused:
                    raise PayloadTooLarge(_message(limit), {"limit": limit})
            return message

        async def guarded_send(message: Message) -> None:
            if not refused:
                await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not refused:
                raise


async def _refuse(send: Send, limit: int) -> None:
    await _answer(send, 413, "payload_too_large", _message(limit), {"limit": limit})


async def _answer(send: Send, status: int, code: str, message: str, details: Any) -> None:
    body: dict[str, Any] = {"error": {"code": code, "message": message, "details": details}}
    raw = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(raw)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": raw})


def _message(limit: int) -> str:
    return f"the request body is larger than the limit of {limit} bytes"
