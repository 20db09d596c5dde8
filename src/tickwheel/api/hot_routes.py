"""The three busiest routes answered without FastAPI's per-request machinery: a single submit
(``POST /v1/executions``), a batch (``POST /v1/executions/batch``) and a read
(``GET /v1/executions/{id}``).

A submit spent about as much CPU in the framework as in tickwheel: the router trying each route's
pattern in turn, the dependency solver, the exit stacks, the response model validated again and
written out. Here the request is parsed once (``json.loads`` and one validation of the body model,
as FastAPI does), the caller authenticated by the same function, the service called as the route
calls it, and the answer written once from the resource model, with the bytes FastAPI writes.

Only what succeeds, or what the domain refuses, is answered here. Anything else (a body that is
not JSON or does not validate, an unusual content type, a path parameter that is not a plain
UUID, a HEAD) goes on to the FastAPI routes with the body already read, so every error body,
status and the OpenAPI document stay theirs. The routes stay declared there and serve the same
requests whenever these are not used (``tests/api/test_hot_routes.py`` holds the two to the same
bytes). ``hot_front.py`` runs them in front of the middleware stack, doing the stack's work."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.types import Message, Receive, Scope

from tickwheel.api.deps import AppState, principal_of, transport_of
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.domain.models import Scope as KeyScope
from tickwheel.resources.executions import BatchBody, BatchResult, Execution, SubmitBody

PREFIX = "/v1/executions"
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_JSON = "application/json"


class FallBack(Exception):
    """The request is not one this module answers: the FastAPI route does."""


Handler = Callable[["Call"], Awaitable["Answer"]]


@dataclass(frozen=True)
class Matched:
    """The FastAPI route's template (``path``), the request metrics' label."""

    path: str


_SUBMIT = Matched(PREFIX)
_BATCH = Matched(PREFIX + "/batch")
_READ = Matched(PREFIX + "/{execution_id}")


def handler(scope: Scope) -> tuple[Matched, Handler] | None:
    if scope["type"] != "http" or scope.get("root_path"):
        return None
    path: str = scope["path"]
    method: str = scope["method"]
    if not path.startswith(PREFIX):
        return None
    if path == PREFIX:
        return (_SUBMIT, _submit) if method == "POST" else None
    if path == _BATCH.path:
        return (_BATCH, _submit_batch) if method == "POST" else None
    if method == "GET" and path[len(PREFIX)] == "/" and _UUID.fullmatch(path, len(PREFIX) + 1):
        return (_READ, _get)
    return None


class Call:
    """One request's headers and body, read the way Starlette's ``Request`` reads them."""

    def __init__(self, scope: Scope, body: bytes) -> None:
        self.scope = scope
        self.body = body
        self.state: AppState = scope["app"].state.tickwheel

    def header(self, name: bytes) -> str | None:
        """The first value (as ``request.headers.get``); a repeated header falls back."""
        found = [v for k, v in self.scope["headers"] if k == name]
        if len(found) > 1 and name != b"authorization":
            raise FallBack
        return found[0].decode("latin-1") if found else None

    def json(self) -> Any:
        content_type = self.header(b"content-type")
        if not self.body or content_type is None:
            raise FallBack
        if content_type.split(";", 1)[0].strip().lower() != _JSON:
            raise FallBack
        try:
            return json.loads(self.body)
        except ValueError:
            raise FallBack from None

    async def transport(self) -> InProcessTransport:
        """The caller's tenant's, once its key is checked."""
        who = await principal_of(self.state, self.header(b"authorization"))
        return transport_of(self.state, who)


def _validated(model: type[SubmitBody] | type[BatchBody], value: Any) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError:
        raise FallBack from None


async def _submit(call: Call) -> Answer:
    # FastAPI's order: the JSON first (400), then the key (401), then the body (422), then the
    # key's scope (403).
    value = call.json()
    key = call.header(b"idempotency-key")
    who = await principal_of(call.state, call.header(b"authorization"))
    body: SubmitBody = _validated(SubmitBody, value)
    who.require(KeyScope.SUBMIT)
    info, created = await transport_of(call.state, who).submit_model(body.to_request(key))
    return _json(_dump(info), 201 if created else 200)


async def _submit_batch(call: Call) -> Answer:
    if call.header(b"prefer") is not None:
        raise FallBack  # the route reads it (``Prefer: return=minimal``, api/prefer.py)
    value = call.json()
    who = await principal_of(call.state, call.header(b"authorization"))
    body: BatchBody = _validated(BatchBody, value)
    who.require(KeyScope.SUBMIT)
    requests = [item.to_request(item.idempotencyKey) for item in body.items]
    items = await transport_of(call.state, who).submit_many_models(requests)
    return _json(_dump(BatchResult(items=items)), 200)


async def _get(call: Call) -> Answer:
    execution_id = uuid.UUID(call.scope["path"][len(PREFIX) + 1 :])
    transport = await call.transport()
    record = await transport.executions_service.get(execution_id)
    return _json(_dump(Execution.of(record)), 200)


def _dump(model: BaseModel) -> bytes:
    """What FastAPI writes for a response model (``TypeAdapter.dump_json(by_alias=True)``)."""
    return model.__pydantic_serializer__.to_json(model, by_alias=True)


@dataclass(frozen=True, slots=True)
class Answer:
    """A route's JSON answer, written by ``hot_front`` as Starlette's ``Response`` writes it."""

    status: int
    body: bytes


def _json(content: bytes, status: int) -> Answer:
    return Answer(status, content)


async def read_body(receive: Receive) -> bytes | None:
    """The whole body (None: the client disconnected first)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` with the body already read handed out again first."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
