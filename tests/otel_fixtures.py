"""The tracing fixtures the tests of spans share (loaded by the root conftest): a tracer provider
of the test's own, never the global one, and the in-memory exporter its spans land in."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tickwheel.observability import tracing


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    """Made current for tickwheel for the test, and shut down after it."""
    own = TracerProvider()
    tracing.use_tracer_provider(own)
    try:
        yield own
    finally:
        tracing.use_tracer_provider(None)
        own.shutdown()


@pytest.fixture
def exporter(provider: TracerProvider) -> InMemorySpanExporter:
    """Where the spans of ``provider`` land."""
    exported = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    return exported
