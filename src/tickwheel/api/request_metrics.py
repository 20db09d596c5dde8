"""A pure ASGI middleware timing every HTTP request by method, route template and status.

The route is the template (``/v1/executions/{execution_id}``), read from the route the router
matched, never the raw path: one series per route, not one per execution id. A request that
matched no route is counted under ``<unmatched>`` for the same reason (a scanner probing random
paths must not grow the registry)."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwheel.observability.metrics import Metrics

UNMATCHED = "<unmatched>"


class RequestMetrics:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500  # what the client gets if the app raises before it answers

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            # The router writes the matched route into this same scope dict on its way down.
            route = getattr(scope.get("route"), "path", None) or UNMATCHED
            self.metrics.http_duration.labels(scope["method"], route, str(status)).observe(
                time.perf_counter() - start
            )
