"""A pure ASGI middleware that refuses request bodies over a limit with 413 — checked on the
declared length and again while streaming, so a lying or chunked client cannot get past it."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwheel.domain.errors import PayloadTooLarge


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        received = 0

        async def limited_receive() -> Message:
            # Raised inside the app, so the app's own error handling renders the 413.
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise PayloadTooLarge(_message(self.max_bytes), {"limit": self.max_bytes})
            return message

        await self.app(scope, limited_receive, send)

    async def _refuse(self, send: Send) -> None:
        body: dict[str, Any] = {
            "error": {
                "code": "payload_too_large",
                "message": _message(self.max_bytes),
                "details": {"limit": self.max_bytes},
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
