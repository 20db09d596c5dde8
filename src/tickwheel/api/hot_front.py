"""The hot routes (``hot_routes.py``) answered in front of the middleware stack: the API's app
is ``HotApp``, a FastAPI whose ``__call__`` sends a request for one of them here first.

Why: with the routes themselves cut to one parse, one validation and one write, the server's CPU
per single submit went next to the layers every request crosses: FastAPI's and Starlette's
entries, their error and telemetry middlewares, then ours (request metrics, the body limit, the
trace, the 500 handler), each an ``await`` deeper, and five of them wrapping ``send`` in a
closure that every response message passes through; then Starlette's ``Response`` object. Here
one function does what those layers do for these requests, in their order, and writes the two
ASGI messages itself:

- the request metrics: the same histogram, method, route template and status, its labelled
  series looked up once per (method, route, status) (a request refused before its route is
  known is counted under ``<unmatched>`` as there);
- the body limit: only a request that declares a length within the limit is taken here (a
  declared length is the body's length: the HTTP server frames the body by it), and only a URL
  without ``%00``; anything else goes through the stack, whose ``BodyLimit`` answers it;
- the caller's trace (``traceparent``), continued while the route runs, as ``IncomingTrace``;
- without authentication, only requests addressed to a loopback name (others go through the
  stack, whose ``LoopbackHostOnly`` refuses them);
- an unexpected exception: the logged JSON 500 of ``errors.unexpected``, the connection kept.

What is not plainly one of these requests goes through the whole stack as before: a request the
route hands back (``_FallBack``: FastAPI's own refusals), with the body already read; any
request while FastAPI's native telemetry is on (its spans and metrics come from its
``__call__``) or under a ``root_path``. ``tests/api/test_hot_routes.py`` holds every answer to
the FastAPI routes' bytes and ``tests/api/test_hot_front.py`` the layers' work."""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI
from prometheus_client import Histogram
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from tickwheel.api.errors import domain_error_response, unexpected
from tickwheel.api.hosts import loopback_host
from tickwheel.api.hot_routes import (
    Call,
    FallBack,
    Handler,
    Matched,
    handler,
    read_body,
    replay,
)
from tickwheel.api.request_metrics import UNMATCHED
from tickwheel.domain.errors import TickwheelError
from tickwheel.observability.tracing import continued

_CONTENT_LENGTH = b"content-length"
_TRANSFER_ENCODING = b"transfer-encoding"
_TRACEPARENT = b"traceparent"
_TRACESTATE = b"tracestate"
_HOST = b"host"
_JSON = b"application/json"


class HotFront:
    """The layers' work for the hot routes; ``HotApp.hot`` (None: every request goes through
    the stack, as ``create_app(..., hot_routes=False)`` makes it for the tests)."""

    def __init__(self, histogram: Histogram, max_bytes: int, loopback_only: bool) -> None:
        """``max_bytes``: the body limit of these paths (``BodyLimit``'s default);
        ``loopback_only``: the server runs without authentication (``LoopbackHostOnly``)."""
        self.histogram = histogram
        self.max_bytes = max_bytes
        self.loopback_only = loopback_only
        self._series: dict[tuple[str, str, int], Any] = {}

    def _observe(self, method: str, route: str, status: int, seconds: float) -> None:
        series = self._series.get((method, route, status))
        if series is None:
            series = self._series[(method, route, status)] = self.histogram.labels(
                method, route, str(status)
            )
        series.observe(seconds)

    def _takes(self, scope: Scope) -> tuple[list[str], list[str]] | None:
        """The request's ``traceparent`` and ``tracestate`` values, or None when one of the
        stack's layers must see it: a body not declared, or declared over the limit (or twice),
        a ``%00`` in the query, a host refused without authentication."""
        length: bytes | None = None
        declared = 0
        host = b""
        parents: list[str] = []
        states: list[str] = []
        for name, value in scope["headers"]:  # ASGI lower-cases the names
            if name == _CONTENT_LENGTH:
                length = value
                declared += 1
            elif name == _TRANSFER_ENCODING:
                return None
            elif name == _TRACEPARENT:
                parents.append(value.decode("latin-1"))
            elif name == _TRACESTATE:
                states.append(value.decode("latin-1"))
            elif name == _HOST:
                host = value
        if length is None:
            if scope["method"] == "POST":
                return None
        elif declared > 1 or not length.isdigit() or int(length) > self.max_bytes:
            return None
        if b"%00" in scope.get("query_string", b""):
            return None
        if self.loopback_only and not loopback_host(host.decode("latin-1")):
            return None
        return parents, states

    async def __call__(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        matched: tuple[Matched, Handler],
        stack: ASGIApp,
    ) -> None:
        taken = self._takes(scope)
        if taken is None:
            await stack(scope, receive, send)
            return
        started = time.perf_counter()
        route, run = matched
        method: str = scope["method"]
        body = b""
        if method == "POST":
            read = await read_body(receive)
            if read is None:
                # The client went away before sending its body: no one to answer (counted as
                # the stack counts it, a 500 of no route).
                self._observe(method, UNMATCHED, 500, time.perf_counter() - started)
                return
            body = read
        parents, states = taken
        try:
            if parents:
                with continued(parents, states):
                    status = await _answer(scope, receive, send, run, body)
            else:
                status = await _answer(scope, receive, send, run, body)
        except FallBack:
            await stack(scope, replay(body, receive), send)
            return
        except BaseException:
            # Out with the response half sent, as through the stack: the server drops the
            # connection; the metrics count a 500 of this route.
            self._observe(method, route.path, 500, time.perf_counter() - started)
            raise
        self._observe(method, route.path, status, time.perf_counter() - started)


async def _answer(scope: Scope, receive: Receive, send: Send, run: Handler, body: bytes) -> int:
    """Runs the route and writes its answer; the status written."""
    try:
        answer = await run(Call(scope, body))
    except FallBack:
        raise
    except TickwheelError as exc:
        response = domain_error_response(exc)
        await response(scope, receive, send)
        return response.status_code
    except Exception as exc:
        response = await unexpected(Request(scope), exc)
        await response(scope, receive, send)
        return response.status_code
    content = answer.body
    await send(
        {
            "type": "http.response.start",
            "status": answer.status,
            # Starlette's Response: its length, then its media type (no charset for JSON).
            "headers": [(_CONTENT_LENGTH, b"%d" % len(content)), (b"content-type", _JSON)],
        }
    )
    await send({"type": "http.response.body", "body": content})
    return answer.status


class HotApp(FastAPI):
    """FastAPI with the hot routes answered by ``hot`` (``HotFront``) in front of the stack."""

    hot: HotFront | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        front = self.hot
        if front is not None and scope["type"] == "http" and not self.root_path:
            matched = handler(scope)
            if matched is not None and not _telemetry_on(self):
                scope["app"] = self  # what Starlette sets: the routes read the state there
                await front(scope, receive, send, matched, super().__call__)
                return
        await super().__call__(scope, receive, send)


def _telemetry_on(app: FastAPI) -> bool:
    """Whether FastAPI's native telemetry (OpenTelemetry, when configured) would observe the
    request in its ``__call__`` (then the request goes through it)."""
    telemetry = getattr(app, "_native_telemetry", None)
    return telemetry is not None and bool(telemetry.enabled())
