"""The HTTP transport. A network error or a timeout leaves the outcome unknown, not failed, so
requests are retried; submissions always carry an idempotency key, which makes a retried submit
return the execution the first try may already have created."""

from __future__ import annotations

import asyncio
import builtins
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from tickwheel.client.transport import Wire
from tickwheel.client.transports.answers import ServerError as ServerError
from tickwheel.client.transports.answers import checked
from tickwheel.client.transports.http_cron import HttpCronMethods
from tickwheel.client.transports.http_workflows import HttpWorkflowMethods
from tickwheel.domain.errors import (
    BadRequest,
    Conflict,
    FieldError,
    Forbidden,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    TickwheelError,
    Unauthorized,
    Unavailable,
)
from tickwheel.domain.models import ExecutionFilter
from tickwheel.domain.submission import SubmitRequest
from tickwheel.observability.tracing import current_context
from tickwheel.resources.base import Resource
from tickwheel.resources.definitions import Definition, DefinitionList
from tickwheel.resources.executions import (
    AttemptList,
    BatchReceipts,
    BatchResult,
    Execution,
    ExecutionOutput,
    ExecutionPage,
    HistoryList,
    SubmitBody,
    SubmitReceipt,
)

_CONTENT_TYPES = {"yaml": "application/yaml", "json": "application/json", "xml": "application/xml"}
_RETRY_STATUSES = {502, 503, 504}
MAX_RETRY_AFTER = 10.0
NO_KEY = (
    "the server needs an API key and none was given: set TICKWHEEL_API_KEY "
    "(or pass api_key=... to the SDK, --api-key to the CLI)"
)


class HttpTransport(HttpCronMethods, HttpWorkflowMethods):
    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.2,
        http: httpx.AsyncClient | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        # Sent with each request rather than set on the client, which may be the caller's.
        self._auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout)
        self._retries = retries
        self._backoff = backoff
        self._sleep = sleep  # injected: tests see the waits without waiting

    async def close(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any, bool]:
        """(status, decoded body, whether it took more than one try)."""
        # The caller's current span (W3C ``traceparent``/``tracestate``), so that the server
        # continues its trace: a submission stores it for the attempts (docs/tracing.md).
        trace = current_context() or {}
        kwargs["headers"] = {**self._auth, **trace, **kwargs.get("headers", {})}
        for attempt in range(self._retries + 1):
            delay = self._backoff * 2**attempt
            try:
                response = await self._http.request(method, path, **kwargs)
            except httpx.TransportError:
                if attempt == self._retries:
                    raise
            else:
                if response.status_code not in _RETRY_STATUSES or attempt == self._retries:
                    return response.status_code, _decode(response), attempt > 0
                # The server knows when it expects to be back (a database restarting): wait that
                # long rather than spend the retries before it could answer.
                delay = max(delay, _retry_after(response.headers.get("retry-after")))
            await self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _ok(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        status, body, _ = await self._call(method, path, **kwargs)
        if status >= 400:
            raise self._error(status, body)
        return status, body

    async def _read(
        self, model: type[Resource], method: str, path: str, **kwargs: Any
    ) -> tuple[int, Wire]:
        """``_ok``, with the answer read into ``model`` (``answers.py``)."""
        status, body = await self._ok(method, path, **kwargs)
        return status, checked(model, body, f"{method} {path}")

    def _error(self, status: int, body: Any) -> TickwheelError:
        """The API's error, except that a 401 to a request sent without any key says so: the
        server's "no or bad key" cannot know the key was never found."""
        error = error_from_response(status, body)
        if status == 401 and not self._auth:
            return Unauthorized(f"{NO_KEY} (the server said: {error.message})", error.details)
        return error

    async def definition_apply(
        self, body: bytes, fmt: str, shared: bool = False
    ) -> tuple[Wire, bool]:
        headers = {"Content-Type": _CONTENT_TYPES[fmt]}
        params = {"shared": "true"} if shared else {}
        status, data = await self._read(
            Definition, "PUT", "/v1/definitions", content=body, headers=headers, params=params
        )
        return data, status == 201

    async def definition_list(self) -> builtins.list[Wire]:
        return list((await self._read(DefinitionList, "GET", "/v1/definitions"))[1]["items"])

    async def definition_versions(self, name: str) -> builtins.list[Wire]:
        path = f"/v1/definitions/{name}"
        return list((await self._read(DefinitionList, "GET", path))[1]["items"])

    async def definition_get(self, name: str, version: int) -> Wire:
        path = f"/v1/definitions/{name}/versions/{version}"
        return (await self._read(Definition, "GET", path))[1]

    async def submit(self, request: SubmitRequest) -> tuple[Wire, bool]:
        key = request.idempotency_key or f"sdk-{uuid.uuid4()}"
        status, data = await self._read(
            Execution,
            "POST",
            "/v1/executions",
            json=SubmitBody.body(request),
            headers={"Idempotency-Key": key},
        )
        return data, status == 201

    async def submit_many(self, requests: builtins.list[SubmitRequest]) -> builtins.list[Wire]:
        items = [
            {**SubmitBody.body(r), "idempotencyKey": r.idempotency_key or f"sdk-{uuid.uuid4()}"}
            for r in requests
        ]
        path = "/v1/executions/batch"
        _, data = await self._read(BatchResult, "POST", path, json={"items": items})
        return list(data["items"])

    async def submit_many_receipts(
        self, requests: builtins.list[SubmitRequest]
    ) -> builtins.list[SubmitReceipt]:
        """``submit_many`` asking for ``Prefer: return=minimal`` (RFC 7240). A server that does
        not apply the preference (one older than it) answers in full: an item with its
        ``execution`` is then read as the full answer and made into the same receipt."""
        items = [
            {**SubmitBody.body(r), "idempotencyKey": r.idempotency_key or f"sdk-{uuid.uuid4()}"}
            for r in requests
        ]
        path = "/v1/executions/batch"
        headers = {"Prefer": "return=minimal"}
        _, body = await self._ok("POST", path, json={"items": items}, headers=headers)
        answered = body.get("items") if isinstance(body, dict) else None
        if isinstance(answered, list) and any(
            isinstance(i, dict) and "execution" in i for i in answered
        ):
            full = BatchResult.model_validate(checked(BatchResult, body, f"POST {path}"))
            return [item.receipt() for item in full.items]
        receipts = BatchReceipts.model_validate(checked(BatchReceipts, body, f"POST {path}"))
        return [item.receipt() for item in receipts.items]

    async def get(self, execution_id: uuid.UUID) -> Wire:
        return (await self._read(Execution, "GET", f"/v1/executions/{execution_id}"))[1]

    async def list(self, flt: ExecutionFilter, cursor: str | None, limit: int) -> Wire:
        params: list[tuple[str, str]] = [("limit", str(limit))]
        params += [("status", str(s)) for s in flt.statuses]
        for name, value in (
            ("definition", flt.definition_uri),
            ("idempotencyKey", flt.idempotency_key),
            ("idempotencyKeyPrefix", flt.idempotency_key_prefix),
            ("executeFrom", flt.execute_from.isoformat() if flt.execute_from else None),
            ("executeTo", flt.execute_to.isoformat() if flt.execute_to else None),
            ("cursor", cursor),
        ):
            if value is not None:
                params.append((name, value))
        return (await self._read(ExecutionPage, "GET", "/v1/executions", params=params))[1]

    async def attempts(self, execution_id: uuid.UUID) -> builtins.list[Wire]:
        path = f"/v1/executions/{execution_id}/attempts"
        return list((await self._read(AttemptList, "GET", path))[1]["items"])

    async def output(self, execution_id: uuid.UUID) -> Wire:
        path = f"/v1/executions/{execution_id}/output"
        return (await self._read(ExecutionOutput, "GET", path))[1]

    async def history(self, execution_id: uuid.UUID) -> builtins.list[Wire]:
        path = f"/v1/executions/{execution_id}/history"
        return list((await self._read(HistoryList, "GET", path))[1]["items"])

    async def cancel(self, execution_id: uuid.UUID) -> Wire:
        return await self._transition("DELETE", f"/v1/executions/{execution_id}", {"CANCELLED"})

    async def replay(self, execution_id: uuid.UUID) -> Wire:
        # After a replay, the execution may already have moved on from READY.
        moved_on = {"READY", "RUNNING", "RETRY_WAIT", "SUCCEEDED"}
        return await self._transition("POST", f"/v1/executions/{execution_id}/replay", moved_on)

    async def _transition(self, method: str, path: str, done: set[str]) -> Wire:
        """A cancel or replay whose first try may have reached the server: when a retry meets
        the state the first try produced, the first try won and that is the answer."""
        status, body, retried = await self._call(method, path)
        if status < 400:
            return checked(Execution, body, f"{method} {path}")
        exc = self._error(status, body)
        current = exc.details.get("status") if isinstance(exc.details, dict) else None
        if retried and isinstance(exc, Conflict) and current in done:
            return await self.get(uuid.UUID(path.split("/")[3]))
        raise exc


def _decode(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except json.JSONDecodeError:
        return {"error": {"code": "server_error", "message": response.text[:500]}}


def _retry_after(value: str | None) -> float:
    """Seconds from a ``Retry-After`` header of seconds, capped so that a wrong header cannot
    stall a client for long; 0 when absent or not a number (an HTTP date is not used here)."""
    try:
        return min(max(float(value or 0), 0.0), MAX_RETRY_AFTER)
    except ValueError:
        return 0.0


_BY_STATUS: dict[int, type[TickwheelError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
}


def error_from_response(status: int, body: Any) -> TickwheelError:
    """Turns the API's error JSON back into the exception the in-process transport would raise."""
    error = body.get("error", {}) if isinstance(body, dict) else {}
    message = str(error.get("message") or f"HTTP {status}")
    details = error.get("details")
    if status == 422:
        fields = [
            FieldError(str(d.get("path", "")), str(d.get("message", "")))
            for d in details or []
            if isinstance(d, dict)
        ]
        return InvalidInput(message, fields)
    if status == 503 and error.get("code") == "unavailable":
        return Unavailable(message)
    cls = _BY_STATUS.get(status, ServerError)
    exc = cls(message, details)
    return exc
