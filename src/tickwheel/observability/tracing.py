"""OpenTelemetry tracing, when the ``otel`` extra is installed (docs/tracing.md).

The submitter's trace context (W3C ``traceparent`` and ``tracestate``) is stored with the
execution, and every span about it (submit, promotion, claim, attempt) continues that trace. The
store's promotion and claim are batches serving many traces at once, so their spans are made per
execution after the statement, with the statement's start and end as the span's.

Without the packages, or with them but no tracer provider installed, nothing here does anything:
no context is captured (so nothing is stored), and no span is made. The packages are imported on
first use, so a process that never traces never loads them."""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

TRACER_NAME = "tickwheel"
ATTR_EXECUTION_ID = "tickwheel.execution_id"
ATTR_ATTEMPT = "tickwheel.attempt"
ATTR_FENCING_TOKEN = "tickwheel.fencing_token"
ATTR_DEFINITION = "tickwheel.definition_uri"
ATTR_CRON_JOB_ID = "tickwheel.cron_job_id"
ATTR_CRON_JOB = "tickwheel.cron_job"
ATTR_OCCURRENCE = "tickwheel.occurrence"
ATTR_WORKFLOW_RUN_ID = "tickwheel.workflow_run_id"
_provider: Any = None


@dataclass(frozen=True)
class _Otel:
    trace: ModuleType
    context: ModuleType
    propagator: Any


@cache
def _otel() -> _Otel | None:
    """The OpenTelemetry API, or None when the extra is not installed."""
    try:
        from opentelemetry import context, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        return None
    # The W3C format itself, not the globally configured propagator: the stored form must be the
    # same whatever a process configures, since another process continues it.
    return _Otel(trace, context, TraceContextTextMapPropagator())


def use_tracer_provider(provider: Any) -> None:
    """Where tickwheel's spans go: ``provider`` (an OpenTelemetry ``TracerProvider``), or with
    None the global one (``opentelemetry.trace.set_tracer_provider``), for an application that
    keeps its providers to itself, and for tests."""
    global _provider
    _provider = provider


PROVIDER_ENV = "OTEL_PYTHON_TRACER_PROVIDER"
"""OpenTelemetry's setting naming a global tracer provider, made at the first ask for one."""


def _may_trace() -> bool:
    """Whether a tracer provider can be installed in this process: tickwheel's own
    (``use_tracer_provider``), or OpenTelemetry's global one, which needs ``opentelemetry.trace``
    imported (``set_tracer_provider`` is there; the SDK and every instrumentation import it) or
    named by ``PROVIDER_ENV``. A process with neither never traces: a submission then neither
    imports the packages (8 ms at its first) nor asks them for a provider (each one's)."""
    return _provider is not None or "opentelemetry.trace" in sys.modules or _named_in_environment()


_ENVIRON = type(os.environ)
_PROVIDER_KEY = os.environ.encodekey(PROVIDER_ENV)


def _named_in_environment() -> bool:
    """``PROVIDER_ENV in os.environ``, asked at every submission of a process that never traces
    (the variable may be set at any time: OpenTelemetry reads it at each ask for a provider
    until one is made). ``os.environ`` has no ``__contains__`` of its own: the generic one looks
    the name up and catches the KeyError of a name not set, about 1 µs a submission; its
    dictionary of encoded names, which every change to ``os.environ`` writes through, answers
    the same in a lookup. Anything else standing in for ``os.environ`` is asked as it is."""
    environ = os.environ
    if type(environ) is _ENVIRON:
        names: dict[Any, Any] = environ._data  # type: ignore[attr-defined]
        return _PROVIDER_KEY in names
    return PROVIDER_ENV in environ


def _tracer(otel: _Otel) -> Any:
    """tickwheel's tracer, None while no provider is installed (the API's default makes only
    non-recording spans: skipping them keeps an untraced submit as cheap as without otel)."""
    provider = _provider or otel.trace.get_tracer_provider()
    if isinstance(provider, otel.trace.ProxyTracerProvider | otel.trace.NoOpTracerProvider):
        return None
    return _tracer_of(provider)


@cache
def _tracer_of(provider: Any) -> Any:
    return provider.get_tracer(TRACER_NAME)


def current_context() -> dict[str, str] | None:
    """The active span's context as W3C headers, None when there is no valid one to continue.
    Cheap in a process that never loaded OpenTelemetry (no span can be active there): what the
    HTTP transport asks before each request."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    otel = _otel()
    if otel is None or not otel.trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    otel.propagator.inject(carrier)
    return carrier or None


TRACEPARENT_MAX = 512
"""Longest ``traceparent`` continued (version 00 is 55 characters; later versions may add)."""
TRACESTATE_MAX = 512
"""Longest ``tracestate`` kept (the W3C minimum to propagate); longer, the state is dropped."""


def _remote_parent(otel: _Otel, parents: Sequence[str], states: Sequence[str]) -> Any:
    """The OpenTelemetry context of a request's W3C headers, None unless it names a valid span.
    Hostile input is ignored, never raised: a repeated ``traceparent`` (which W3C declares
    invalid) or an oversized one gives no parent; an oversized ``tracestate`` is dropped alone,
    as W3C allows, and the propagator checks the rest (format, all-zero ids, version ff)."""
    if len(parents) != 1 or len(parents[0]) > TRACEPARENT_MAX:
        return None
    carrier = {"traceparent": parents[0]}
    state = ",".join(states)
    if state and len(state) <= TRACESTATE_MAX:
        carrier["tracestate"] = state
    try:
        context = otel.propagator.extract(carrier)
    except Exception:  # a propagator's bug must not fail the request: it goes on untraced
        return None
    return context if otel.trace.get_current_span(context).get_span_context().is_valid else None


@contextmanager
def continued(parents: Sequence[str], states: Sequence[str]) -> Iterator[None]:
    """Makes the span a request's ``traceparent`` names (and its ``tracestate``) the current
    one while the request runs, as an HTTP server continues its client's trace: a submission
    then stores the submitter's trace, and the server's submit span is a child of the client's.
    Does nothing without otel, for headers that name no valid span, or when a span is already
    current (an instrumentation of the server made its own child of the same headers)."""
    otel = _otel()
    if otel is None or otel.trace.get_current_span().get_span_context().is_valid:
        yield
        return
    with _attached(otel, _remote_parent(otel, parents, states)):
        yield


def can_continue() -> bool:
    """Whether ``continuing`` would do anything here: otel is installed and no span is current
    (a caller may then skip looking up a stored context at all)."""
    otel = _otel()
    return otel is not None and not otel.trace.get_current_span().get_span_context().is_valid


@contextmanager
def continuing(stored: Mapping[str, str] | None) -> Iterator[None]:
    """Makes a stored context the current one while the block runs, unless a span is already
    current: what the orchestrator does to submit a workflow run's later tasks in the trace of
    its first ones (docs/tracing.md)."""
    otel = _otel()
    if not stored or otel is None or otel.trace.get_current_span().get_span_context().is_valid:
        yield
        return
    parent = _parent(otel, stored)
    valid = otel.trace.get_current_span(parent).get_span_context().is_valid
    with _attached(otel, parent if valid else None):
        yield


@contextmanager
def _attached(otel: _Otel, parent: Any) -> Iterator[None]:
    if parent is None:
        yield
        return
    token = otel.context.attach(parent)
    try:
        yield
    finally:
        otel.context.detach(token)


def _parent(otel: _Otel, stored: Mapping[str, str] | None) -> Any:
    """The OpenTelemetry context continuing ``stored`` (None: no parent)."""
    return otel.propagator.extract(dict(stored)) if stored else None


def _attributes(
    execution_id: uuid.UUID, definition_uri: str, attempt: int | None, token: int | None
) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        ATTR_EXECUTION_ID: str(execution_id),
        ATTR_DEFINITION: definition_uri,
    }
    if attempt is not None:
        attributes[ATTR_ATTEMPT] = attempt
    if token is not None:
        attributes[ATTR_FENCING_TOKEN] = token
    return attributes


def submit_span(count: int) -> AbstractContextManager[Any]:
    """A ``tickwheel.submit`` span around a submission of ``count`` executions, current while
    it runs (so that ``current_context`` names it); yields the span, or None without otel or
    a tracer (then one shared context that does nothing: no generator and no context manager
    made and entered for each untraced submission)."""
    if not _may_trace():
        return _NO_SPAN
    otel = _otel()
    tracer = _tracer(otel) if otel is not None else None
    if otel is None or tracer is None:
        return _NO_SPAN
    return _submit_span(otel, tracer, count)


_NO_SPAN = nullcontext(None)


@contextmanager
def _submit_span(otel: _Otel, tracer: Any, count: int) -> Iterator[Any]:
    kind = otel.trace.SpanKind.PRODUCER
    with tracer.start_as_current_span("tickwheel.submit", kind=kind) as span:
        span.set_attribute("tickwheel.count", count)
        yield span


@contextmanager
def new_traces(name: str, attributes: Sequence[dict[str, Any]]) -> Iterator[list[Any]]:
    """A root span ``name`` per item of ``attributes``, each the start of a trace of its own,
    from entry to exit (a cron tick's occurrences: one trace each, not one for the tick). Yields
    the spans, or a None per item without otel or a tracer. Not made current: a batch carries
    each one's context in its request (``context_of``); ``current`` makes one current."""
    otel = _otel() if _may_trace() else None
    tracer = _tracer(otel) if otel is not None else None
    if otel is None or tracer is None:
        yield [None] * len(attributes)
        return
    root = otel.context.Context()  # no parent, whatever span is current
    kind = otel.trace.SpanKind.PRODUCER
    spans = [tracer.start_span(name, context=root, kind=kind, attributes=a) for a in attributes]
    try:
        yield spans
    except Exception as exc:
        status = otel.trace.Status(otel.trace.StatusCode.ERROR, f"{type(exc).__name__}: {exc}")
        for span in spans:
            span.set_status(status)
        raise
    finally:
        for span in spans:
            span.end()


def context_of(span: Any) -> dict[str, str] | None:
    """``span``'s context as W3C headers (None for no span)."""
    otel = _otel()
    if span is None or otel is None:
        return None
    carrier: dict[str, str] = {}
    otel.propagator.inject(carrier, context=otel.trace.set_span_in_context(span))
    return carrier or None


@contextmanager
def current(span: Any) -> Iterator[None]:
    """``span`` (from ``new_traces``) as the current span while the block runs; its end stays
    ``new_traces``'s. Nothing for None."""
    otel = _otel()
    if span is None or otel is None:
        yield
        return
    with otel.trace.use_span(span, end_on_exit=False):
        yield


def mark_submitted(span: Any, execution_ids: Iterable[uuid.UUID]) -> None:
    """Names the execution a one-item submit span created (or found by its key)."""
    ids = [str(i) for i in execution_ids]
    if span is not None and len(ids) == 1:
        span.set_attribute(ATTR_EXECUTION_ID, ids[0])


def now_ns() -> int:
    """A span's start or end time (OpenTelemetry counts nanoseconds since the epoch)."""
    return time.time_ns()


def record_batch(
    name: str,
    items: Iterable[tuple[Mapping[str, str] | None, dict[str, Any]]],
    started_ns: int,
) -> None:
    """One span ``name`` per item that has a stored context, each a child of it, spanning from
    ``started_ns`` to now: what one batch statement (a promotion, a claim) did for each trace.
    A batch without one loads nothing (OpenTelemetry is imported by the first traced batch)."""
    traced = [item for item in items if item[0]]
    if not traced:
        return
    otel = _otel()
    if otel is None:
        return
    tracer = _tracer(otel)
    if tracer is None:
        return
    ended = now_ns()
    for stored, attributes in traced:
        if not stored:  # none left, but the type does not say so
            continue
        span = tracer.start_span(
            name, context=_parent(otel, stored), attributes=attributes, start_time=started_ns
        )
        span.end(end_time=ended)


Traced = list[tuple[Mapping[str, str] | None, dict[str, Any]]]
"""The executions a batch statement moved that have a trace: (stored context, attributes)."""


def trace_promoted(
    traced: Traced, execution_id: uuid.UUID, definition_uri: str, stored: Any
) -> None:
    """Adds a promoted execution to ``traced`` when it has a stored context (a dict, or its JSON
    text as SQLite keeps it)."""
    if not stored or _otel() is None:
        return
    context = json.loads(stored) if isinstance(stored, str) else stored
    traced.append((context, _attributes(execution_id, definition_uri, None, None)))


def record_claims(executions: Iterable[Any], started_ns: int) -> None:
    """``tickwheel.claim`` spans for claimed executions (with their attempt and fencing token).
    The attempt reads the context from the claimed execution itself (``attempt_span``).
    OpenTelemetry is loaded by the first claim of a traced execution, not by the first claim
    (its import, ~8 ms of CPU, came with every worker's start)."""
    traced = [e for e in executions if e.trace_context and e.fencing_token is not None]
    if not traced or _otel() is None:
        return
    items = [
        (e.trace_context, _attributes(e.execution_id, e.definition_uri, e.attempt_count, token))
        for e in traced
        if (token := e.fencing_token) is not None
    ]
    record_batch("tickwheel.claim", items, started_ns)


@contextmanager
def attempt_span(
    execution_id: uuid.UUID,
    definition_uri: str,
    attempt: int,
    token: int,
    stored: Mapping[str, str] | None,
) -> Iterator[Any]:
    """A ``tickwheel.attempt`` span around one attempt, a child of the stored context, current
    while the handler runs (a handler's own spans are its children). Yields None (and makes no
    span) without otel or without a stored context: an untraced submission stays untraced."""
    otel = _otel()
    tracer = _tracer(otel) if otel is not None and stored else None
    if otel is None or tracer is None:
        yield None
        return
    with tracer.start_as_current_span(
        "tickwheel.attempt",
        context=_parent(otel, stored),
        kind=otel.trace.SpanKind.CONSUMER,
        attributes=_attributes(execution_id, definition_uri, attempt, token),
    ) as span:
        yield span


def mark_outcome(span: Any, ok: bool, kind: str | None, message: str) -> None:
    """The attempt's outcome on its span: an error status for a failure, with its kind."""
    otel = _otel()
    if span is None or otel is None:
        return
    if ok:
        return
    span.set_attribute("tickwheel.failure_kind", kind or "snooze")
    if kind is not None:
        span.set_status(otel.trace.Status(otel.trace.StatusCode.ERROR, message))
