"""A pure ASGI middleware continuing the caller's W3C trace (docs/tracing.md): the request's
``traceparent`` and ``tracestate`` become the current context while the route runs, so that a
submission stores the submitter's trace, as it does in-process.

The headers are the client's, so hostile: a malformed, repeated or oversized ``traceparent`` is
ignored (the request goes on untraced), and nothing of them is stored as sent. What is stored is
the context of the span current at the submit, written out again in the W3C form. A request
without a ``traceparent`` costs a look at its headers."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from tickwheel.observability.tracing import continued

_TRACEPARENT = b"traceparent"
_TRACESTATE = b"tracestate"


class IncomingTrace:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        parents: list[str] = []
        states: list[str] = []
        for name, value in scope["headers"]:  # ASGI lower-cases the names
            if name == _TRACEPARENT:
                parents.append(value.decode("latin-1"))
            elif name == _TRACESTATE:
                states.append(value.decode("latin-1"))
        if not parents:
            await self.app(scope, receive, send)
            return
        with continued(parents, states):
            await self.app(scope, receive, send)
