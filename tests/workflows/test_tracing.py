"""Workflow runs and tracing (docs/tracing.md), on both backends: a run started inside a span
has every task run in that trace, the first tasks (submitted at the start) and the later ones
(submitted by the orchestrator, in no span of its own) alike."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.workflows.helpers import DIAMOND, TENANT, WorkflowRig
from tickwheel.observability import tracing

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _spans(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _attr(span: ReadableSpan, name: str) -> Any:
    return (span.attributes or {})[name]


async def _stored(rig: WorkflowRig, execution_id: str) -> dict[str, str] | None:
    execution = await rig.store.execution_get(TENANT, uuid.UUID(execution_id))
    assert execution is not None
    return execution.trace_context


async def test_every_task_of_a_run_is_in_the_starters_trace(
    rig: WorkflowRig, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    await rig.apply(DIAMOND)
    with provider.get_tracer("the-application").start_as_current_span("nightly") as starter:
        run_id = await rig.start("nightly-report", day="2026-03-01")
    await rig.settle()
    assert (await rig.get(run_id))["status"] == "SUCCEEDED"
    trace_id = starter.get_span_context().trace_id

    tasks = await rig.tasks(run_id)
    by_execution = {t["executionId"]: name for name, t in tasks.items()}
    submits = {
        by_execution[_attr(s, "tickwheel.execution_id")]: s
        for s in _spans(exporter, "tickwheel.submit")
    }
    assert set(submits) == {"extract", "clean", "stats", "publish"}
    assert {s.context.trace_id for s in submits.values()} == {trace_id}
    # The first task's submit is the starter's child; the later ones continue the first's.
    first = submits["extract"]
    assert first.parent is not None
    assert first.parent.span_id == starter.get_span_context().span_id
    for name in ("clean", "stats", "publish"):
        parent = submits[name].parent
        assert parent is not None and parent.span_id == first.context.span_id
    attempts = _spans(exporter, "tickwheel.attempt")
    assert len(attempts) == 4
    assert {s.context.trace_id for s in attempts} == {trace_id}


async def test_without_a_tracer_the_starters_context_still_reaches_every_task(
    rig: WorkflowRig,
) -> None:
    """A server with otel but no tracer (a request's ``traceparent``, nothing recording): each
    task stores the request's context, for workers that do trace."""
    await rig.apply(DIAMOND)
    with tracing.continued([TRACEPARENT], []):
        run_id = await rig.start("nightly-report", day="2026-03-01")
    await rig.settle()
    tasks = await rig.tasks(run_id)
    assert len(tasks) == 4
    for task in tasks.values():
        assert await _stored(rig, task["executionId"]) == {"traceparent": TRACEPARENT}


async def test_a_run_started_untraced_stays_untraced(rig: WorkflowRig) -> None:
    await rig.apply(DIAMOND)
    run_id = await rig.start("nightly-report", day="2026-03-01")
    await rig.settle()
    assert (await rig.get(run_id))["status"] == "SUCCEEDED"
    for task in (await rig.tasks(run_id)).values():
        assert await _stored(rig, task["executionId"]) is None


async def test_without_the_packages_a_run_is_untraced_and_runs(
    rig: WorkflowRig,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tracing, "_otel", lambda: None)
    await rig.apply(DIAMOND)
    with provider.get_tracer("the-application").start_as_current_span("outside"):
        run_id = await rig.start("nightly-report", day="2026-03-01")
    await rig.settle()
    assert (await rig.get(run_id))["status"] == "SUCCEEDED"
    for task in (await rig.tasks(run_id)).values():
        assert await _stored(rig, task["executionId"]) is None
    assert [s.name for s in exporter.get_finished_spans()] == ["outside"]


async def test_the_store_finds_the_runs_earliest_traced_task(rig: WorkflowRig) -> None:
    await rig.apply(DIAMOND)
    untraced = await rig.start("nightly-report", "untraced", day="2026-03-01")
    assert await rig.workflows.workflow_run_trace_context(untraced) is None
    with tracing.continued([TRACEPARENT], []):
        traced = await rig.start("nightly-report", "traced", day="2026-03-01")
    context = await rig.workflows.workflow_run_trace_context(traced)
    assert context == {"traceparent": TRACEPARENT}
    assert await rig.workflows.workflow_run_trace_context(uuid.uuid4()) is None
