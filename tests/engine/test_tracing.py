"""OpenTelemetry tracing (docs/tracing.md) on both backends: a submission inside a span stores
its W3C context, and the claim and the attempt continue that trace with the execution's id,
attempt and fencing token; without a tracer (or without the packages) nothing is stored and
everything works."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests.engine.test_services import Rig, register
from tickwheel.domain.submission import SubmitRequest
from tickwheel.observability import tracing
from tickwheel.store.protocol import Store


@pytest.fixture
async def rig(store: Store) -> Rig:
    await register(store, "add", "add")
    await register(store, "flaky", "fails", inputs={"depth": {"type": "integer", "default": 0}})
    return Rig(store)


def _spans(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


async def _stored(rig: Rig, eid: uuid.UUID) -> dict[str, str] | None:
    execution = await rig.store.execution_get("acme", eid)
    assert execution is not None
    return execution.trace_context


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _span_id(traceparent: str) -> tuple[int, int]:
    """(trace id, span id) of a W3C ``traceparent``: version-trace-span-flags."""
    _, trace_id, span_id, _ = traceparent.split("-")
    return int(trace_id, 16), int(span_id, 16)


async def test_the_attempt_continues_the_submitters_trace(
    rig: Rig, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = provider.get_tracer("the-application")
    with tracer.start_as_current_span("handle-order") as request_span:
        eid = uuid.UUID(await rig.submit("add", a=2, b=3))
    trace_id = request_span.get_span_context().trace_id

    stored = await _stored(rig, eid)
    assert stored is not None
    stored_trace, stored_span = _span_id(stored["traceparent"])
    assert stored_trace == trace_id
    [submit] = _spans(exporter, "tickwheel.submit")
    assert submit.context.span_id == stored_span  # the stored context is the submit span's
    request_span_id = request_span.get_span_context().span_id
    assert submit.parent is not None and submit.parent.span_id == request_span_id
    assert _attrs(submit)["tickwheel.execution_id"] == str(eid)

    assert await rig.work() == 1
    assert await rig.status(str(eid)) == "SUCCEEDED"
    [claim] = _spans(exporter, "tickwheel.claim")
    [attempt] = _spans(exporter, "tickwheel.attempt")
    for span in (claim, attempt):
        assert span.context.trace_id == trace_id
        assert span.parent is not None and span.parent.span_id == stored_span
        assert _attrs(span) == {
            "tickwheel.execution_id": str(eid),
            "tickwheel.definition_uri": "registry://jobs/add",
            "tickwheel.attempt": 1,
            "tickwheel.fencing_token": _token_of(span),
        }
    assert attempt.status.status_code is StatusCode.UNSET
    assert _attrs(claim)["tickwheel.fencing_token"] == _attrs(attempt)["tickwheel.fencing_token"]


def _token_of(span: ReadableSpan) -> Any:
    token = _attrs(span)["tickwheel.fencing_token"]
    assert isinstance(token, int) and token > 0
    return token


async def test_a_retry_is_a_new_attempt_span_in_the_same_trace(
    rig: Rig, exporter: InMemorySpanExporter
) -> None:
    eid = uuid.UUID(await rig.submit("flaky"))  # no active span: the submit span is the root
    assert await rig.work() == 1
    rig.clock.advance(2)
    assert await rig.scheduler.run_once() == 1
    assert await rig.work() == 1
    attempts = _spans(exporter, "tickwheel.attempt")
    [submit] = _spans(exporter, "tickwheel.submit")
    assert [_attrs(s)["tickwheel.attempt"] for s in attempts] == [1, 2]
    assert {s.context.trace_id for s in attempts} == {submit.context.trace_id}
    tokens = [_attrs(s)["tickwheel.fencing_token"] for s in attempts]
    assert tokens[0] != tokens[1]
    assert attempts[0].status.status_code is StatusCode.ERROR
    [promotion] = _spans(exporter, "tickwheel.promotion")  # the retry, made READY when due
    assert promotion.context.trace_id == submit.context.trace_id
    assert _attrs(attempts[0])["tickwheel.execution_id"] == str(eid)


async def test_a_scheduled_execution_gets_a_promotion_span(
    rig: Rig, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with provider.get_tracer("the-application").start_as_current_span("plan"):
        eid = uuid.UUID(await rig.submit("add", delay=10))
    stored = await _stored(rig, eid)
    assert stored is not None
    trace_id, submit_span_id = _span_id(stored["traceparent"])
    rig.clock.advance(10)
    assert await rig.scheduler.run_once() == 1
    [promotion] = _spans(exporter, "tickwheel.promotion")
    assert promotion.context.trace_id == trace_id
    assert promotion.parent is not None and promotion.parent.span_id == submit_span_id
    assert _attrs(promotion) == {
        "tickwheel.execution_id": str(eid),
        "tickwheel.definition_uri": "registry://jobs/add",
    }
    assert await rig.work() == 1
    [attempt] = _spans(exporter, "tickwheel.attempt")
    assert attempt.context.trace_id == trace_id


async def test_the_trace_is_not_part_of_the_request(
    rig: Rig, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A client that retries its keyed submit from another trace gets the same execution."""
    tracer = provider.get_tracer("the-application")
    keyed = SubmitRequest("registry://jobs/add", idempotency_key="order-7")
    with tracer.start_as_current_span("first"):
        first, created = await rig.client.submit(keyed)
    with tracer.start_as_current_span("retry"):
        again, created_again = await rig.client.submit(keyed)
    assert created and not created_again
    assert again["executionId"] == first["executionId"]
    assert "traceContext" not in first and "trace_context" not in first


async def test_a_batch_is_one_submit_span_and_each_execution_continues_it(
    rig: Rig, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    requests = [SubmitRequest("registry://jobs/add", inputs={"a": n}) for n in range(3)]
    with provider.get_tracer("the-application").start_as_current_span("import"):
        answers = await rig.client.submit_many(requests)
    [submit] = _spans(exporter, "tickwheel.submit")
    assert _attrs(submit)["tickwheel.count"] == 3
    for answer in answers:
        stored = await _stored(rig, uuid.UUID(answer["execution"]["executionId"]))
        assert stored is not None
        assert _span_id(stored["traceparent"]) == (submit.context.trace_id, submit.context.span_id)
    assert await rig.work() == 3
    attempts = _spans(exporter, "tickwheel.attempt")
    assert len(attempts) == 3
    assert {s.parent.span_id for s in attempts if s.parent} == {submit.context.span_id}


async def test_without_a_tracer_nothing_is_stored_and_nothing_breaks(rig: Rig) -> None:
    eid = uuid.UUID(await rig.submit("add", a=1, b=1))
    assert await _stored(rig, eid) is None
    assert await rig.work() == 1
    assert await rig.status(str(eid)) == "SUCCEEDED"


async def test_without_the_packages_nothing_is_traced(
    rig: Rig,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As if the otel extra were not installed: not one span, not one stored context."""
    monkeypatch.setattr(tracing, "_otel", lambda: None)
    tracer = provider.get_tracer("the-application")
    with tracer.start_as_current_span("outside"):
        eid = uuid.UUID(await rig.submit("add"))
    assert await _stored(rig, eid) is None
    assert await rig.work() == 1
    assert await rig.status(str(eid)) == "SUCCEEDED"
    assert [s.name for s in exporter.get_finished_spans()] == ["outside"]


def test_without_the_packages_importing_and_running_the_helpers_works() -> None:
    """In a process where ``opentelemetry`` cannot be imported at all."""
    code = (
        "import sys, uuid; sys.modules['opentelemetry'] = None\n"
        "from tickwheel.observability import tracing as t\n"
        "assert t.current_context() is None\n"
        "with t.submit_span(1) as s: assert s is None\n"
        "parent = {'traceparent': 'x'}\n"
        "with t.attempt_span(uuid.uuid4(), 'u', 1, 1, parent) as s: assert s is None\n"
        "tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'\n"
        "with t.continued([tp], []): assert t.current_context() is None\n"
        "with t.continuing({'traceparent': tp}): assert t.current_context() is None\n"
        "assert not t.can_continue()\n"
        "with t.new_traces('n', [{}, {}]) as spans: assert spans == [None, None]\n"
        "assert t.context_of(None) is None\n"
        "with t.current(None): pass\n"
        "t.record_claims([], t.now_ns())\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_packages_are_imported_only_when_used() -> None:
    code = (
        "import sys\n"
        "import tickwheel.engine.worker, tickwheel.app.executions, tickwheel.store.factory\n"
        "assert 'opentelemetry' not in sys.modules, 'imported at import time'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


SUBMITS_UNTRACED = """
import asyncio, json, sys
import tickwheel
from tests.factories import definition_doc

async def main():
    async with await tickwheel.connect_async(sys.argv[1], tenant="acme") as client:
        await client.apply_definition(json.dumps(definition_doc()), "json")
        await client.submit("greet", {"name": "Ada"})
        await client.submit_many([tickwheel.SubmitRequest(definition_uri="greet")], answer="ids")
    assert "opentelemetry" not in sys.modules, "a submission imported OpenTelemetry"

asyncio.run(main())
"""


def test_a_process_that_never_traces_submits_without_importing_the_packages(
    tmp_path: Path, sqlite_template: Path
) -> None:
    """Installed but unused (no provider: not set by the application, not named in the
    environment), the packages are never imported by a submission (their import was 8 ms of
    the first submission's time, and every one asked them for a provider)."""
    path = tmp_path / "db.sqlite"
    shutil.copyfile(sqlite_template, path)
    env = {k: v for k, v in os.environ.items() if k != tracing.PROVIDER_ENV}
    args = [sys.executable, "-c", SUBMITS_UNTRACED, f"sqlite:///{path}"]
    subprocess.run(args, check=True, timeout=120, env=env)


def test_a_provider_named_in_the_environment_traces_a_submission() -> None:
    """OpenTelemetry makes the provider ``OTEL_PYTHON_TRACER_PROVIDER`` names at the first ask:
    a process that imported nothing else of it still gets its submit span."""
    code = (
        "from tickwheel.observability import tracing as t\n"
        "with t.submit_span(1) as span: assert span is not None and span.is_recording()\n"
    )
    env = {**os.environ, tracing.PROVIDER_ENV: "sdk_tracer_provider"}
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, env=env)


async def test_the_attempt_reads_the_context_of_the_claimed_execution(
    rig: Rig,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker continues the context the claim returned with the row (no side channel): a
    claim answering another context makes the attempt a child of that one."""
    with provider.get_tracer("the-application").start_as_current_span("submitter"):
        eid = uuid.UUID(await rig.submit("add"))
    elsewhere = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    claim = rig.store.execution_claim_ready

    async def claim_elsewhere(*args: Any, **kwargs: Any) -> list[Any]:
        return [replace(e, trace_context=elsewhere) for e in await claim(*args, **kwargs)]

    monkeypatch.setattr(rig.store, "execution_claim_ready", claim_elsewhere)
    assert await rig.work() == 1
    [attempt] = _spans(exporter, "tickwheel.attempt")
    assert _attrs(attempt)["tickwheel.execution_id"] == str(eid)
    assert (attempt.context.trace_id, attempt.parent and attempt.parent.span_id) == _span_id(
        elsewhere["traceparent"]
    )


async def test_an_execution_claimed_without_a_context_runs_untraced(
    rig: Rig, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the claim's spans did: the attempt follows the row it runs."""
    eid = uuid.UUID(await rig.submit("add"))
    assert await _stored(rig, eid) is not None  # a root submit span's context
    claim = rig.store.execution_claim_ready

    async def claim_untraced(*args: Any, **kwargs: Any) -> list[Any]:
        return [replace(e, trace_context=None) for e in await claim(*args, **kwargs)]

    monkeypatch.setattr(rig.store, "execution_claim_ready", claim_untraced)
    assert await rig.work() == 1
    assert _spans(exporter, "tickwheel.attempt") == []
    assert await rig.status(str(eid)) == "SUCCEEDED"
