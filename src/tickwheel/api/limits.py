"""A pure ASGI middleware that refuses request bodies over a limit with 413 — checked on the
declared length and again while streaming, so a lying or chunked client cannot get past it."""

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
        limit = self.larger.get(scope.get("path", ""), self.default_bytes)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(send, limit)
            return
        received = 0

        async def limited_receive() -> Message:
            # Raised inside the app, so the app's own error handling renders the 413.
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise PayloadTooLarge(_message(limit), {"limit": limit})
            return message

        await self.app(scope, limited_receive, send)

    async def _refuse(self, send: Send, limit: int) -> None:
        body: dict[str, Any] = {
            "error": {
                "code": "payload_too_large",
                "message": _message(limit),
                "details": {"limit": limit},
            }
        }
        raw = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(raw)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": raw})


def _message(limit: int) -> str:
    return f"the request body is larger than the limit of {limit} bytes"
