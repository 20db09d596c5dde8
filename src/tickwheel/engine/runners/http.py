"""``http`` executions: send the inputs as a JSON body to a URL; the answer's JSON object body is
the output.

Each request carries the definition's headers plus ``Idempotency-Key: <execution_id>`` (the same
on every attempt, so the receiver can drop repeats), ``X-Tickwheel-Attempt`` and
``X-Tickwheel-Fencing-Token``. GET sends no body. Redirects are not followed.

How answers map to outcomes: 2xx is success, its body a JSON object (an empty body means ``{}``;
other JSON or a non-JSON body is "invalid_output"). 429 and 5xx are "server_error" and
retried; other statuses are "client_error", which retrying will not fix. A connection that
fails is "error" and one that times out is "timeout", both retried. The failure detail keeps
the status and the tail of the body.
"""

from __future__ import annotations

import json
from typing import Any, Final

import httpx

from tickwheel.domain.definitions import Definition, HttpExecution
from tickwheel.domain.fieldtypes import json_type_name
from tickwheel.engine.runners.base import JobContext, RunOutcome, failure, shorten

__all__ = ["BODY_LIMIT", "HttpRunner"]

BODY_LIMIT: Final = 1024 * 1024  # the most of a response body that is read
TAIL_LIMIT: Final = 2 * 1024  # how much of a body's end a failure keeps


class HttpRunner:
    """Runs ``http`` executions. ``client`` is shared across attempts when given (its owner
    closes it); otherwise each attempt opens and closes its own."""

    def __init__(
        self,
        client: httpx.AsyncClient | None = None,
        *,
        body_limit: int = BODY_LIMIT,
        tail_limit: int = TAIL_LIMIT,
    ) -> None:
        self._client = client
        self.body_limit = body_limit
        self.tail_limit = tail_limit

    async def run(
        self, definition: Definition, inputs: dict[str, Any], ctx: JobContext
    ) -> RunOutcome:
        execution = definition.execution
        if not isinstance(execution, HttpExecution):
            return failure("permanent", f"the http runner cannot run a {execution.type} job")
        request = _Request(execution, inputs, ctx, definition.timeout)
        if self._client is not None:
            return await self._send(self._client, request)
        async with httpx.AsyncClient() as client:
            return await self._send(client, request)

    async def _send(self, client: httpx.AsyncClient, request: _Request) -> RunOutcome:
        what = f"{request.method} {shorten(request.url, 200)}"
        try:
            async with client.stream(
                request.method,
                request.url,
                headers=request.headers,
                content=request.content,
                timeout=request.timeout,
                follow_redirects=False,
            ) as response:
                body = await self._read(response)
        except httpx.TimeoutException as exc:
            return failure("timeout", f"{what}: timed out ({type(exc).__name__})")
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            return failure("permanent", f"{what}: {exc}")
        except httpx.HTTPError as exc:  # refused, reset, DNS, protocol errors: may pass
            return failure("error", f"{what}: {type(exc).__name__}: {exc}")
        return self._outcome(what, response, body)

    async def _read(self, response: httpx.Response) -> bytes:
        """The body, read up to one byte past ``body_limit`` (the rest is not read at all)."""
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > self.body_limit:
                break
        return bytes(body[: self.body_limit + 1])

    def _outcome(self, what: str, response: httpx.Response, body: bytes) -> RunOutcome:
        status = response.status_code
        tail = body[-self.tail_limit :].decode("utf-8", errors="replace")
        detail: dict[str, Any] = {"status": status, "body_tail": tail}
        if not 200 <= status < 300:
            answered = f"{what} answered {status} {response.reason_phrase}".rstrip()
            if status == 429 or status >= 500:
                if "retry-after" in response.headers:
                    detail["retry_after"] = response.headers["retry-after"]
                return failure("server_error", answered, **detail)
            if 300 <= status < 400 and "location" in response.headers:
                location = shorten(response.headers["location"], 200)
                answered += f" (redirects to {location}; point the definition there)"
            return failure("client_error", answered, **detail)
        if len(body) > self.body_limit:
            return failure(
                "invalid_output",
                f"{what}: the response body is over {self.body_limit} bytes",
                status=status,
            )
        if not body.strip():
            return RunOutcome(ok=True, output={})
        try:
            value = json.loads(body)
        except ValueError:
            return failure("invalid_output", f"{what}: the response body is not JSON", **detail)
        if not isinstance(value, dict):
            kind = json_type_name(value)
            return failure(
                "invalid_output",
                f"{what}: the response body must be a JSON object, got {kind}",
                **detail,
            )
        return RunOutcome(ok=True, output=value)


class _Request:
    """What to send for one attempt."""

    def __init__(
        self, execution: HttpExecution, inputs: dict[str, Any], ctx: JobContext, timeout: float
    ) -> None:
        self.method = execution.method
        self.url = execution.url
        self.headers = httpx.Headers(list(execution.headers))
        # Ours win over the definition's: the idempotency key is the promise to the receiver.
        self.headers["Idempotency-Key"] = str(ctx.execution_id)
        self.headers["X-Tickwheel-Attempt"] = str(ctx.attempt)
        self.headers["X-Tickwheel-Fencing-Token"] = str(ctx.fencing_token)
        self.content: bytes | None = None
        if self.method != "GET":
            self.content = json.dumps(inputs).encode()
            self.headers["Content-Type"] = "application/json"
        # httpx's own default (5 s) would cut off a slow but legitimate job: use the definition's.
        self.timeout = httpx.Timeout(timeout)
