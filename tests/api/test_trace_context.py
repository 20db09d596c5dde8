"""The submitter's trace over HTTP (docs/tracing.md), on both backends: the SDK's HTTP transport
sends the W3C headers of the caller's span, a real server (uvicorn on a loopback port) continues
them, stores the submitter's context with the execution, and the attempt on a worker is in the
submitter's trace. A malformed or oversized ``traceparent`` is ignored: never a 5xx, never
stored."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.engine.test_services import Rig, register
from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.client import AsyncClient, Client
from tickwheel.client.transports.http import HttpTransport
from tickwheel.config import Settings
from tickwheel.domain.errors import NotFound
from tickwheel.domain.models import Scope
from tickwheel.domain.submission import SubmitRequest
from tickwheel.observability import tracing
from tickwheel.store.protocol import Store

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
VALID = f"00-{TRACE}-{SPAN}-01"


@dataclass
class Served:
    url: str
    key: str
    rig: Rig


@pytest.fixture
async def served(store: Store) -> AsyncIterator[Served]:
    """The API on a loopback port, served by this test's loop, beside a worker on its store."""
    await register(store, "add", "add")
    rig = Rig(store)
    _, key = await create_key(store, "acme", Scope.ADMIN, "tracing", rig.clock.now())
    app = create_app(store, Settings(_env_file=None), rig.clock)  # type: ignore[call-arg]
    sock = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        assert not task.done(), "the server did not start"
        await asyncio.sleep(0.01)
    try:
        yield Served(f"http://127.0.0.1:{sock.getsockname()[1]}", key, rig)
    finally:
        server.should_exit = True
        await task


def _spans(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _ids(traceparent: str) -> tuple[int, int]:
    _, trace_id, span_id, _ = traceparent.split("-")
    return int(trace_id, 16), int(span_id, 16)


async def _stored(served: Served, execution_id: uuid.UUID) -> dict[str, str] | None:
    execution = await served.rig.store.execution_get("acme", execution_id)
    assert execution is not None
    return execution.trace_context


async def test_a_trace_started_by_the_caller_continues_in_the_attempt_on_a_worker(
    served: Served, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = provider.get_tracer("the-fastapi-app")
    async with AsyncClient(served.url, served.key) as client:
        with tracer.start_as_current_span("POST /orders", kind=SpanKind.SERVER) as request_span:
            info = await client.submit("add", {"a": 2, "b": 3})
            [many] = await client.submit_many([SubmitRequest("add", inputs={"a": 1})])
    caller = request_span.get_span_context()

    # The server's submit span is the caller's child; its context is what was stored.
    submits = _spans(exporter, "tickwheel.submit")
    assert len(submits) == 2
    for submit in submits:
        assert submit.context.trace_id == caller.trace_id
        assert submit.parent is not None and submit.parent.span_id == caller.span_id
    stored = await _stored(served, info.execution_id)
    assert stored is not None
    assert _ids(stored["traceparent"]) == (caller.trace_id, submits[0].context.span_id)
    assert many.execution is not None
    stored_many = await _stored(served, many.execution.execution_id)
    assert stored_many is not None
    assert _ids(stored_many["traceparent"]) == (caller.trace_id, submits[1].context.span_id)

    assert await served.rig.work() == 2
    attempts = {
        _attr(s, "tickwheel.execution_id"): s for s in _spans(exporter, "tickwheel.attempt")
    }
    attempt = attempts[str(info.execution_id)]
    assert attempt.context.trace_id == caller.trace_id
    assert attempt.parent is not None and attempt.parent.span_id == submits[0].context.span_id
    assert attempts[str(many.execution.execution_id)].context.trace_id == caller.trace_id
    assert await served.rig.status(str(info.execution_id)) == "SUCCEEDED"


def _attr(span: ReadableSpan, name: str) -> Any:
    return (span.attributes or {})[name]


async def test_the_blocking_client_sends_its_callers_span_too(
    served: Served, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """``Client`` calls on a loop thread of its own; the caller's span still goes with them."""
    tracer = provider.get_tracer("a-script")

    def script() -> tuple[int, uuid.UUID]:
        with Client(served.url, served.key) as client, tracer.start_as_current_span("job") as s:
            return s.get_span_context().trace_id, client.submit("add").execution_id

    # In a thread: the server answers on this test's loop, which must not be blocked.
    trace_id, execution_id = await asyncio.to_thread(script)
    stored = await _stored(served, execution_id)
    assert stored is not None and _ids(stored["traceparent"])[0] == trace_id
    assert await served.rig.work() == 1
    [attempt] = _spans(exporter, "tickwheel.attempt")
    assert attempt.context.trace_id == trace_id


async def test_a_server_without_a_tracer_still_passes_the_callers_context_on(
    served: Served,
) -> None:
    """No provider on the server (OpenTelemetry's default): no server span, but the caller's
    context is stored and the attempt (of a worker that traces) continues it."""
    async with httpx.AsyncClient(base_url=served.url) as http:
        r = await http.post(
            "/v1/executions",
            json={"definitionUri": "registry://jobs/add"},
            headers={"Authorization": f"Bearer {served.key}", "traceparent": VALID},
        )
    assert r.status_code == 201, r.text
    assert await _stored(served, uuid.UUID(r.json()["executionId"])) == {"traceparent": VALID}


HOSTILE = [
    pytest.param([("traceparent", "garbage")], id="not-w3c"),
    pytest.param([("traceparent", VALID + "-" + "a" * 20_000)], id="oversized"),
    pytest.param([("traceparent", f"00-{'0' * 32}-{SPAN}-01")], id="zero-trace-id"),
    pytest.param([("traceparent", f"00-{TRACE}-{'0' * 16}-01")], id="zero-span-id"),
    pytest.param([("traceparent", f"ff-{TRACE}-{SPAN}-01")], id="version-ff"),
    pytest.param([("traceparent", VALID.upper())], id="upper-case"),
    pytest.param([("traceparent", VALID + "-extra")], id="version-00-with-more"),
    pytest.param([("traceparent", VALID), ("traceparent", VALID)], id="repeated"),
    pytest.param([("traceparent", f"00-{TRACE}-{SPAN}\u00e9-01".encode())], id="not-ascii"),
    pytest.param([("traceparent", "")], id="empty"),
]


@pytest.mark.parametrize("headers", HOSTILE)
async def test_a_malformed_traceparent_is_ignored(
    served: Served,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    headers: list[tuple[str, str | bytes]],
) -> None:
    """The request goes on as if untraced: the server's submit span is a root, and what is
    stored is its context, never the header."""
    async with httpx.AsyncClient(base_url=served.url) as http:
        r = await http.post(
            "/v1/executions",
            json={"definitionUri": "registry://jobs/add"},
            headers=[("Authorization", f"Bearer {served.key}"), *headers],
        )
    assert r.status_code == 201, r.text
    [submit] = _spans(exporter, "tickwheel.submit")
    assert submit.parent is None
    stored = await _stored(served, uuid.UUID(r.json()["executionId"]))
    assert stored is not None and set(stored) == {"traceparent"}
    assert _ids(stored["traceparent"]) == (submit.context.trace_id, submit.context.span_id)
    assert submit.context.trace_id != int(TRACE, 16)


async def test_an_oversized_tracestate_is_dropped_and_the_traceparent_kept(
    served: Served, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with httpx.AsyncClient(base_url=served.url) as http:
        auth = {"Authorization": f"Bearer {served.key}", "traceparent": VALID}
        huge = ",".join(f"k{n}=v" for n in range(200))
        bad = await http.post(
            "/v1/executions",
            json={"definitionUri": "registry://jobs/add"},
            headers=auth | {"tracestate": huge},
        )
        good = await http.post(
            "/v1/executions",
            json={"definitionUri": "registry://jobs/add"},
            headers=auth | {"tracestate": "vendor=abc,other=1"},
        )
    assert bad.status_code == good.status_code == 201
    dropped = await _stored(served, uuid.UUID(bad.json()["executionId"]))
    kept = await _stored(served, uuid.UUID(good.json()["executionId"]))
    assert dropped is not None and set(dropped) == {"traceparent"}
    assert _ids(dropped["traceparent"])[0] == int(TRACE, 16)
    assert kept is not None and kept["tracestate"] == "vendor=abc,other=1"
    assert all(
        s.parent is not None and s.parent.span_id == int(SPAN, 16)
        for s in _spans(exporter, "tickwheel.submit")
    )


async def test_every_call_of_the_http_transport_carries_the_callers_span(
    provider: TracerProvider,
) -> None:
    """Reads, cancels and cron calls too (a server that traces them continues the caller's
    trace); outside any span, no header at all."""
    seen: list[tuple[str, str | None]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.path, request.headers.get("traceparent")))
        return httpx.Response(404, json={"error": {"code": "not_found", "message": "no"}})

    http = httpx.AsyncClient(base_url="http://127.0.0.1", transport=httpx.MockTransport(answer))
    transport = HttpTransport("http://127.0.0.1", "k", http=http)
    eid = uuid.uuid4()
    tracer = provider.get_tracer("the-application")
    with tracer.start_as_current_span("inside") as span:
        for call in (transport.get(eid), transport.cancel(eid), transport.cron_get("nightly")):
            with pytest.raises(NotFound):
                await call
    with pytest.raises(NotFound):
        await transport.get(eid)
    await transport.close()
    ctx = span.get_span_context()
    inside = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
    assert seen == [
        (f"/v1/executions/{eid}", inside),
        (f"/v1/executions/{eid}", inside),
        ("/v1/cron-jobs/nightly", inside),
        (f"/v1/executions/{eid}", None),
    ]


async def test_without_the_packages_a_traceparent_is_ignored(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As if the otel extra were not installed on the server: the header changes nothing."""
    monkeypatch.setattr(tracing, "_otel", lambda: None)
    async with httpx.AsyncClient(base_url=served.url) as http:
        r = await http.post(
            "/v1/executions",
            json={"definitionUri": "registry://jobs/add"},
            headers={"Authorization": f"Bearer {served.key}", "traceparent": VALID},
        )
    assert r.status_code == 201, r.text
    assert await _stored(served, uuid.UUID(r.json()["executionId"])) is None
    assert await served.rig.work() == 1


CLIENT_WITHOUT_OTEL = """
import asyncio, json, sys, uuid
sys.modules["opentelemetry"] = None  # as if the extra were not installed
import httpx
import tickwheel
from tests.factories import definition_doc
from tickwheel.client import AsyncClient

seen = []

def answer(request):
    seen.append(request.headers.get("traceparent"))
    body = {"error": {"code": "not_found", "message": "no"}}
    return httpx.Response(404, json=body)

async def main():
    async with await tickwheel.connect_async(sys.argv[1], tenant="acme") as client:
        await client.apply_definition(json.dumps(definition_doc()), "json")
        info = await client.submit("greet", {"name": "Ada"})
        store = client.transport.store
        assert (await store.execution_get("acme", info.execution_id)).trace_context is None
    http = httpx.AsyncClient(base_url="http://t", transport=httpx.MockTransport(answer))
    remote = AsyncClient("http://t", "key")
    remote.transport._http = http
    try:
        await remote.get(uuid.uuid4())
    except tickwheel.NotFound:
        pass
    assert seen == [None]
    assert "opentelemetry.trace" not in sys.modules

asyncio.run(main())
"""


def test_the_sdk_without_the_packages_works(tmp_path: Path, sqlite_template: Path) -> None:
    """In a process where ``opentelemetry`` cannot be imported at all (the API server needs it:
    FastAPI imports it): a submit on the database, and the HTTP transport, with no header."""
    path = tmp_path / "db.sqlite"
    shutil.copyfile(sqlite_template, path)
    args = [sys.executable, "-c", CLIENT_WITHOUT_OTEL, f"sqlite:///{path}"]
    subprocess.run(args, check=True, timeout=120)
