"""The blocking ``Client`` runs its calls on a loop thread of its own; each call still runs in
(a copy of) its caller's context, so the caller's current span is the parent of the submit span,
and the attempt continues the caller's trace (docs/tracing.md). Both backends."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tickwheel
from tests.client.conftest import GREET_JSON, Database
from tickwheel.engine.worker import Worker
from tickwheel.observability import tracing
from tickwheel.store.factory import open_store


@pytest.fixture
def exporter() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A provider of this test's own (never the global one) and where its spans land."""
    provider = TracerProvider()
    exported = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    tracing.use_tracer_provider(provider)
    try:
        yield provider, exported
    finally:
        tracing.use_tracer_provider(None)
        provider.shutdown()


@pytest.fixture
def client(database: Database) -> Iterator[tickwheel.Client]:
    with tickwheel.connect(database.url, tenant="acme") as c:
        c.apply_definition(GREET_JSON, "json")
        yield c


def _submits(exported: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exported.get_finished_spans() if s.name == "tickwheel.submit"]


def _connect(database: Database) -> Any:
    if database.kind == "sqlite":
        return sqlite3.connect(database.path or "")
    return psycopg.connect(database.url)


async def test_the_submit_span_is_a_child_of_the_callers_span_and_the_attempt_continues_it(
    database: Database,
    client: tickwheel.Client,
    exporter: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exported = exporter
    tracer = provider.get_tracer("a-script")
    with tracer.start_as_current_span("nightly-import") as caller:
        plain = client.submit("greet", {"name": "Ada"})
        conn = _connect(database)
        try:  # the transactional submit prepares on the loop thread too
            in_tx = client.submit("greet", {"name": "Bob"}, connection=conn)
            conn.commit()
        finally:
            conn.close()
    caller_ctx = caller.get_span_context()
    submits = _submits(exported)
    assert len(submits) == 2
    for submit in submits:
        assert submit.context.trace_id == caller_ctx.trace_id
        assert submit.parent is not None and submit.parent.span_id == caller_ctx.span_id

    store = await open_store(database.url)
    try:
        worker = Worker(store, worker_id="w1")
        assert await worker.run_once() == 2
        await worker.drain()
    finally:
        await store.close()
    attempts = [s for s in exported.get_finished_spans() if s.name == "tickwheel.attempt"]
    ran = {(s.attributes or {})["tickwheel.execution_id"] for s in attempts}
    assert ran == {str(plain.execution_id), str(in_tx.execution_id)}
    assert {s.context.trace_id for s in attempts} == {caller_ctx.trace_id}


def test_each_calling_thread_keeps_its_own_span(
    client: tickwheel.Client, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    """One client shared by threads: a call is parented by the span of the thread that made
    it, not by the span current when the client was made or by another thread's."""
    provider, exported = exporter
    tracer = provider.get_tracer("a-web-app")
    parents: dict[str, int] = {}
    barrier = threading.Barrier(3)

    def request(name: str) -> None:
        with tracer.start_as_current_span(name) as span:
            barrier.wait(10)  # the three calls in flight together
            info = client.submit("greet", {"name": name})
            parents[str(info.execution_id)] = span.get_span_context().span_id

    threads = [threading.Thread(target=request, args=(f"r{n}",)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    submits = _submits(exported)
    assert len(submits) == 3
    got = {
        (s.attributes or {})["tickwheel.execution_id"]: s.parent.span_id
        for s in submits
        if s.parent is not None
    }
    assert got == parents


def test_outside_any_span_the_submit_span_is_a_root(
    client: tickwheel.Client, exporter: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    _, exported = exporter
    client.submit("greet", {"name": "Ada"})
    [submit] = _submits(exported)
    assert submit.parent is None
