"""Cron occurrences and tracing (docs/tracing.md), on both backends: each occurrence starts a
trace of its own, a ``tickwheel.cron.occurrence`` root span naming the job and the instant, which
the execution's attempts continue; a tick's batch is not one trace for all its occurrences."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.cron.helpers import CronRig
from tests.factories import T0
from tickwheel.engine.worker import Worker
from tickwheel.observability import tracing
from tickwheel.store.protocol import Store
from tickwheel.workflows.orchestrator import Orchestrator

MINUTE = 60.0


@pytest.fixture
async def rig(store: Store) -> CronRig:
    rig = CronRig(store, T0)
    await rig.register_workflow()  # the greet definition and a workflow over it
    return rig


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """Spans of a provider of this test's own (never the global one)."""
    provider = TracerProvider()
    exported = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    tracing.use_tracer_provider(provider)
    try:
        yield exported
    finally:
        tracing.use_tracer_provider(None)
        provider.shutdown()


def _spans(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _ids(traceparent: str) -> tuple[int, int]:
    _, trace_id, span_id, _ = traceparent.split("-")
    return int(trace_id, 16), int(span_id, 16)


async def _stored(rig: CronRig, execution_id: uuid.UUID | str) -> dict[str, str] | None:
    execution = await rig.store.execution_get("acme", uuid.UUID(str(execution_id)))
    assert execution is not None
    return execution.trace_context


async def test_each_occurrence_of_a_batch_is_a_trace_of_its_own(
    rig: CronRig, exporter: InMemorySpanExporter
) -> None:
    a = await rig.create(name="every-minute", expression="* * * * *")
    b = await rig.create(name="also-every-minute", expression="* * * * *")
    assert await rig.tick() == 2  # one batch: both jobs allow overlap
    occurrences = _spans(exporter, "tickwheel.cron.occurrence")
    assert len(occurrences) == 2
    assert len({s.context.trace_id for s in occurrences}) == 2
    assert all(s.parent is None for s in occurrences)
    by_job = {_attrs(s)["tickwheel.cron_job_id"]: s for s in occurrences}
    for job in (a, b):
        span = by_job[job["cronJobId"]]
        [row] = await rig.history(job["cronJobId"])
        assert _attrs(span) == {
            "tickwheel.cron_job_id": job["cronJobId"],
            "tickwheel.cron_job": job["name"],
            "tickwheel.occurrence": "2026-03-01T12:01:00Z",
            "tickwheel.execution_id": row["executionId"],
        }
        stored = await _stored(rig, row["executionId"])
        assert stored is not None
        assert _ids(stored["traceparent"]) == (span.context.trace_id, span.context.span_id)

    # The attempts, when due, are in their occurrence's trace.
    rig.clock.advance(MINUTE)
    await rig.store.execution_promote_due(list(range(1024)), 100, rig.clock.now())
    worker = Worker(rig.store, rig.clock, worker_id="w1")
    assert await worker.run_once() == 2
    await worker.drain()
    attempts = _spans(exporter, "tickwheel.attempt")
    assert {s.context.trace_id for s in attempts} == {s.context.trace_id for s in occurrences}


async def test_an_overlap_checked_occurrence_submits_inside_its_span(
    rig: CronRig, exporter: InMemorySpanExporter
) -> None:
    job = await rig.create(expression="* * * * *", overlapPolicy="forbid")
    await rig.advance(MINUTE)
    [occurrence] = _spans(exporter, "tickwheel.cron.occurrence")
    [submit] = _spans(exporter, "tickwheel.submit")
    assert occurrence.parent is None
    assert submit.parent is not None and submit.parent.span_id == occurrence.context.span_id
    [row] = await rig.history(job["cronJobId"])
    assert _attrs(occurrence)["tickwheel.execution_id"] == row["executionId"]
    stored = await _stored(rig, row["executionId"])
    assert stored is not None
    assert _ids(stored["traceparent"]) == (submit.context.trace_id, submit.context.span_id)


async def test_a_workflow_occurrence_starts_its_run_inside_its_span(
    rig: CronRig, exporter: InMemorySpanExporter
) -> None:
    body = {"name": "wf", "workflow": {"name": "greeting"}, "inputs": {"who": "Ada"}}
    job, _ = await rig.jobs.cron_create(body | {"expression": "* * * * *"})
    await rig.advance(MINUTE)
    [occurrence] = _spans(exporter, "tickwheel.cron.occurrence")
    [row] = await rig.history(job["cronJobId"])
    assert _attrs(occurrence)["tickwheel.workflow_run_id"] == row["workflowRunId"]
    run = await rig.client.workflows.get_run(row["workflowRunId"])
    [task] = run.tasks
    assert task.execution_id is not None
    stored = await _stored(rig, str(task.execution_id))
    assert stored is not None
    assert _ids(stored["traceparent"])[0] == occurrence.context.trace_id
    # The orchestrator, hearing of nothing yet, changes none of it.
    orchestrator = Orchestrator(rig.workflows, rig.store, lambda _: rig.client, clock=rig.clock)
    await orchestrator.run_once()
    assert await _stored(rig, str(task.execution_id)) == stored


async def test_without_a_tracer_no_occurrence_stores_a_context(rig: CronRig) -> None:
    job = await rig.create(expression="* * * * *")
    guarded = await rig.create(name="guarded", expression="* * * * *", overlapPolicy="forbid")
    await rig.advance(MINUTE)
    for ref in (job["cronJobId"], guarded["cronJobId"]):
        rows = [r for r in await rig.history(ref) if r["executionId"]]
        assert rows
        for row in rows:
            assert await _stored(rig, row["executionId"]) is None
