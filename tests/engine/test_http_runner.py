"""The http runner, against a real HTTP/1.1 server on 127.0.0.1 (nothing else is contacted)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.engine.helpers import (
    EXECUTION_ID,
    RUNNERS,
    TEST_POLICY,
    LoopbackServer,
    answer,
    context,
    definition,
    echo,
    slow,
)
from tickwheel.domain.definitions import HttpExecution
from tickwheel.engine.runners import HttpRunner, RunOutcome, run_attempt
from tickwheel.observability import tracing


@pytest.fixture
async def server() -> AsyncIterator[LoopbackServer]:
    routes = {
        "/echo": echo,
        "/empty": answer(204),
        "/list": answer(200, [1, 2]),
        "/text": answer(200, b"<html>hello</html>"),
        "/busy": answer(429, {"error": "slow down"}, retry_after="7"),
        "/later": answer(503, b"maintenance", retry_after="86400"),
        "/broken": answer(503, b"upstream down"),
        "/missing": answer(404, b"no such hook"),
        "/moved": answer(301, location="http://127.0.0.1:9/elsewhere"),
        "/big": answer(200, b"x" * 5000),
        "/slow": slow,
    }
    srv = LoopbackServer(routes)
    await srv.start()
    yield srv
    await srv.close()


def http(server: LoopbackServer, path: str, method: str = "POST", timeout: float = 5.0) -> Any:
    headers = (("Idempotency-Key", "theirs"), ("X-Source", "tests"))
    return definition(HttpExecution(server.url + path, method, headers), timeout, got="object")


async def test_http_sends_json_and_attempt_headers(server: LoopbackServer) -> None:
    outcome = await run_attempt(http(server, "/echo"), {"n": 1}, context(), runners=RUNNERS)
    assert outcome == RunOutcome(ok=True, output={"got": {"n": 1}})
    seen = server.seen[-1]
    assert (seen.method, seen.headers["content-type"]) == ("POST", "application/json")
    assert seen.headers["idempotency-key"] == str(EXECUTION_ID)
    assert seen.headers["x-tickwheel-attempt"] == "2"
    assert seen.headers["x-tickwheel-fencing-token"] == "41"
    assert seen.headers["x-source"] == "tests"
    outcome = await run_attempt(http(server, "/echo", "GET"), {"n": 1}, context(), runners=RUNNERS)
    assert outcome.output == {"got": {}} and server.seen[-1].body == b""


async def test_http_empty_body_is_no_outputs(server: LoopbackServer) -> None:
    outcome = await run_attempt(
        definition(HttpExecution(server.url + "/empty")), {}, context(), runners=RUNNERS
    )
    assert outcome == RunOutcome(ok=True, output={})


@pytest.mark.parametrize(
    ("path", "status", "kind", "expected"),
    [
        ("/list", 200, "invalid_output", "must be a JSON object, got array"),
        ("/text", 200, "invalid_output", "is not JSON"),
        ("/busy", 429, "server_error", "answered 429 Too Many Requests"),
        ("/broken", 503, "server_error", "answered 503 Service Unavailable"),
        ("/missing", 404, "client_error", "answered 404 Not Found"),
        ("/moved", 301, "client_error", "redirects to http://127.0.0.1:9/elsewhere"),
    ],
)
async def test_http_answers_map_to_kinds(
    server: LoopbackServer, path: str, status: int, kind: str, expected: str
) -> None:
    # Retry-After read as a snooze is turned off here: the answer's failure kinds are tested.
    runners = {"http": HttpRunner(policy=TEST_POLICY, retry_after_max=0)}
    outcome = await run_attempt(http(server, path), {}, context(), runners=runners)
    assert outcome.kind == kind and expected in outcome.message, outcome
    assert outcome.detail is not None and outcome.detail["status"] == status
    if path == "/busy":
        assert outcome.error() == {
            "kind": "server_error",
            "message": outcome.message,
            "status": 429,
            "body_excerpt": '{"error": "slow down"}',
            "retry_after": "7",
        }


async def test_http_retry_after_on_429_and_503_is_a_bounded_snooze(
    server: LoopbackServer,
) -> None:
    outcome = await run_attempt(http(server, "/busy"), {}, context(), runners=RUNNERS)
    assert (outcome.ok, outcome.kind, outcome.snooze) == (False, None, 7.0)
    assert "429" in outcome.message
    # A day is cut to the runner's bound (300 s by default).
    outcome = await run_attempt(http(server, "/later"), {}, context(), runners=RUNNERS)
    assert outcome.snooze == 300.0
    # Without Retry-After a 503 stays a retried failure.
    outcome = await run_attempt(http(server, "/broken"), {}, context(), runners=RUNNERS)
    assert (outcome.kind, outcome.snooze) == ("server_error", None)


async def test_http_body_over_the_limit_is_invalid_output(server: LoopbackServer) -> None:
    runners = {"http": HttpRunner(body_limit=1000, policy=TEST_POLICY)}
    outcome = await run_attempt(http(server, "/big"), {}, context(), runners=runners)
    assert outcome.kind == "invalid_output" and "over 1000 bytes" in outcome.message


async def test_http_timeout_and_refused_connection_are_retryable(server: LoopbackServer) -> None:
    started = time.monotonic()
    outcome = await run_attempt(http(server, "/slow", timeout=0.3), {}, context(), runners=RUNNERS)
    assert outcome.kind == "timeout" and time.monotonic() - started < 3
    await server.close()  # now nothing listens on its port
    outcome = await run_attempt(http(server, "/echo"), {}, context(), runners=RUNNERS)
    assert outcome.kind == "error" and "ConnectError" in outcome.message
    await server.start()  # for the fixture's teardown


async def test_a_traced_attempt_sends_its_span_as_traceparent(server: LoopbackServer) -> None:
    """The receiver can continue the trace: the header names the attempt's span, in the
    submitter's trace; an untraced attempt sends none."""
    provider = TracerProvider()
    exported = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    tracing.use_tracer_provider(provider)
    try:
        submitted = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        outcome = await run_attempt(
            http(server, "/echo"),
            {"n": 1},
            context(),
            runners=RUNNERS,
            trace_context={"traceparent": submitted},
        )
        assert outcome.ok
        [attempt] = exported.get_finished_spans()
        span = attempt.context
        sent = f"00-{span.trace_id:032x}-{span.span_id:016x}-{int(span.trace_flags):02x}"
        assert server.seen[-1].headers["traceparent"] == sent
        assert f"{span.trace_id:032x}" == submitted.split("-")[1]
        assert (await run_attempt(http(server, "/echo"), {}, context(), runners=RUNNERS)).ok
        assert "traceparent" not in server.seen[-1].headers
    finally:
        tracing.use_tracer_provider(None)
        provider.shutdown()
