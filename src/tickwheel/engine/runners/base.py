"""One attempt of an Execution: the context a handler sees, the outcome a runner reports, and
``run_attempt``, which picks the runner for the definition's execution type, enforces the
definition's timeout and checks the outputs.

A runner never raises for a job's failure: whatever the job does (raises, exits non-zero, answers
500, prints garbage) becomes a failed ``RunOutcome`` with a kind from ``RETRYABLE_KINDS`` or
``PERMANENT_KINDS``. Only cancellation (``asyncio.CancelledError``) propagates, and a runner
cleans up what it started (threads aside, which cannot be stopped) before letting it through.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import traceback
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from tickwheel.domain.definition_refs import versioned
from tickwheel.domain.definitions import (
    PERMANENT_KINDS,
    RETRYABLE_KINDS,
    Definition,
    validate_values,
)
from tickwheel.domain.errors import InvalidInput
from tickwheel.domain.fieldtypes import json_type_name
from tickwheel.domain.jsonvalues import readable
from tickwheel.domain.running import MAX_SNOOZE, Snooze
from tickwheel.engine.runners.attempt_state import AttemptState
from tickwheel.engine.runners.timeouts import timeouts
from tickwheel.observability.tracing import attempt_span, mark_outcome

__all__ = [
    "JobContext",
    "RunOutcome",
    "Runner",
    "check_outputs",
    "failure",
    "job_context",
    "jsonable",
    "returned",
    "run_attempt",
    "shorten",
    "snoozed",
    "succeeded",
    "traceback_tail",
]

MESSAGE_LIMIT: Final = 500
TRACEBACK_LINES: Final = 20


@dataclass(frozen=True)
class JobContext:
    """What a handler sees so its side effects can be idempotent, and its line back to the
    scheduler while it runs: ``progress``, ``save_checkpoint`` (both written with the next
    heartbeat), ``checkpoint`` (the last one saved, by this attempt or an earlier one) and
    ``cancelled`` (docs/flow-control.md, "Running work")."""

    execution_id: uuid.UUID
    attempt: int  # 1-based attempt number
    fencing_token: int
    definition_uri: str
    definition_version: int
    state: AttemptState = field(default_factory=AttemptState, repr=False, compare=False)

    @property
    def checkpoint(self) -> Any:
        """The last checkpoint saved (None: start from the beginning)."""
        return self.state.checkpoint

    @property
    def cancelled(self) -> bool:
        """True once a cancel of this execution reached the worker: stop, and let ``Cancelled``
        (or ``asyncio.CancelledError``) propagate."""
        return self.state.cancelled

    def progress(self, fraction: float, message: str = "") -> None:
        """How far the attempt got, ``fraction`` in [0, 1]; the latest is kept and shown.
        Raises ``tickwheel.Cancelled`` once the execution was cancelled."""
        self.state.progress(fraction, message)

    def save_checkpoint(self, value: Any) -> None:
        """Where to resume (JSON, at most 16 KiB): handed to the next attempt as
        ``checkpoint``. Raises ``tickwheel.Cancelled`` once the execution was cancelled."""
        self.state.save_checkpoint(value)


@dataclass(frozen=True)
class RunOutcome:
    """How one attempt ended. ``kind`` is set exactly when ``ok`` is false."""

    ok: bool
    output: dict[str, Any] | None = None
    kind: str | None = None
    message: str = ""
    detail: dict[str, Any] | None = None
    snooze: float | None = None
    """Seconds after which to run again, not as a failure (``ok`` false, ``kind`` None)."""

    def __post_init__(self) -> None:
        if self.ok and (self.kind is not None or self.snooze is not None):
            raise ValueError(f"a successful outcome has no failure kind, got {self.kind!r}")
        if self.snooze is not None:
            if self.kind is not None or not 0 < self.snooze <= MAX_SNOOZE:
                raise ValueError(f"a snooze is 0 < seconds <= {MAX_SNOOZE:g}, got {self.snooze}")
        elif not self.ok and self.kind not in RETRYABLE_KINDS | PERMANENT_KINDS:
            raise ValueError(f"unknown failure kind {self.kind!r}")

    def error(self) -> dict[str, Any] | None:
        """The JSON-able error to store: ``{"kind", "message", **detail}``; None when ok.

        Made storable: a job's message or stderr may hold NUL or lone surrogates, which
        PostgreSQL refuses and no response can encode; they become U+FFFD."""
        if self.ok:
            return None
        extra = {k: v for k, v in (self.detail or {}).items() if k not in ("kind", "message")}
        error: dict[str, Any] = readable({"kind": self.kind, "message": self.message, **extra})
        return error


_SUCCEEDED = dict(vars(RunOutcome(ok=True, output={})))


def succeeded(output: dict[str, Any]) -> RunOutcome:
    """``RunOutcome(ok=True, output=output)``, which needs no check: built from a checked one.
    Made for every successful attempt, and a frozen dataclass's ``__init__`` (a
    ``object.__setattr__`` per field, then ``__post_init__``) costs more than the copy."""
    outcome: RunOutcome = object.__new__(RunOutcome)
    vars(outcome).update(_SUCCEEDED, output=output)
    return outcome


def job_context(
    execution_id: uuid.UUID,
    attempt: int,
    fencing_token: int,
    definition_uri: str,
    definition_version: int,
    state: AttemptState,
) -> JobContext:
    """``JobContext(...)`` with every field given, built without the frozen dataclass's
    ``__init__`` (one per attempt; it has no ``__post_init__``)."""
    ctx: JobContext = object.__new__(JobContext)
    vars(ctx).update(
        execution_id=execution_id,
        attempt=attempt,
        fencing_token=fencing_token,
        definition_uri=definition_uri,
        definition_version=definition_version,
        state=state,
    )
    return ctx


if hasattr(JobContext, "__post_init__") or len(dataclasses.fields(JobContext)) != 6:
    raise TypeError("JobContext changed: update job_context")


class Runner(Protocol):
    """Runs one attempt of one execution type. Never raises for the job's failure."""

    async def run(
        self, definition: Definition, inputs: dict[str, Any], ctx: JobContext
    ) -> RunOutcome: ...


def failure(kind: str, message: str, **detail: Any) -> RunOutcome:
    """A failed outcome; ``detail`` holds what helps a person (exit code, stderr tail, ...)."""
    return RunOutcome(ok=False, kind=kind, message=shorten(message), detail=detail or None)


def snoozed(snooze: Snooze) -> RunOutcome:
    """A handler's ``Snooze``, as an outcome."""
    return RunOutcome(ok=False, snooze=snooze.seconds, message=snooze.reason)


def returned(result: Any, entrypoint: str) -> RunOutcome:
    """What a python handler returned, as an outcome: a dict is its output, None no output, a
    ``Snooze`` a snooze, and anything else a permanent mistake of the handler (its outputs
    cannot be checked)."""
    if isinstance(result, Snooze):
        return snoozed(result)
    if result is None:
        return succeeded({})
    if not isinstance(result, dict):
        got = shorten(type(result).__name__, 100)
        return failure(
            "invalid_output",
            f"entrypoint {entrypoint!r} returned {got}; it must return a dict or None",
        )
    return succeeded(result)


def shorten(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def jsonable(value: Any) -> Any:
    """``value`` when it can be stored as JSON, else its (shortened) repr."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return shorten(repr(value))
    return value


def traceback_tail(exc: BaseException, lines: int = TRACEBACK_LINES) -> str:
    """The last ``lines`` lines of ``exc``'s formatted traceback: where the job went wrong."""
    text = "".join(traceback.format_exception(exc)).rstrip("\n")
    return "\n".join(text.splitlines()[-lines:])


async def run_attempt(
    definition: Definition,
    inputs: dict[str, Any],
    ctx: JobContext,
    *,
    runners: Mapping[str, Runner] | None = None,
    trace_context: Mapping[str, str] | None = None,
) -> RunOutcome:
    """Run one attempt of ``definition`` with ``inputs`` and return how it ended.

    The runner is chosen by the execution's type (``runners`` overrides the defaults). The
    attempt is cancelled after ``definition.timeout`` seconds and then ends as "timeout"; a job
    that finishes after its limit (by ignoring the cancellation) is a timeout too. A successful
    output must be a JSON object matching ``definition.outputs`` (defaults applied), otherwise
    the attempt ends as "invalid_output", which is permanent. Only cancellation propagates.

    ``trace_context`` is the claimed execution's stored W3C context: the attempt's span
    (docs/tracing.md) continues the submitter's trace when there is one.
    """
    if not trace_context:  # no trace to continue: no span (attempt_span would yield None)
        return await _run_attempt(definition, inputs, ctx, runners)
    uri = ctx.definition_uri
    with attempt_span(ctx.execution_id, uri, ctx.attempt, ctx.fencing_token, trace_context) as span:
        outcome = await _run_attempt(definition, inputs, ctx, runners)
        mark_outcome(span, outcome.ok, outcome.kind, outcome.message)
    return outcome


async def _run_attempt(
    definition: Definition,
    inputs: dict[str, Any],
    ctx: JobContext,
    runners: Mapping[str, Runner] | None,
) -> RunOutcome:
    if runners is None:
        runners = _default_runners()
    kind = definition.execution.type
    runner = runners.get(kind)
    if runner is None:
        return failure("permanent", f"no runner for execution type {kind!r}")
    outcome: RunOutcome | None = None
    # As ``asyncio.timeout(definition.timeout)`` would, with one timer for all attempts.
    limits = timeouts()
    limit = limits.start(definition.timeout)
    try:
        try:
            outcome = await runner.run(definition, inputs, ctx)
        finally:
            expired = limits.end(limit)
    except asyncio.CancelledError:
        if not expired or limit.others:
            raise  # not (only) our limit: a shutdown, a lost lease, a cancel
    except Exception as exc:
        # Past our limit, the runner's TimeoutError is the timeout's; anything else escaping is
        # a runner bug, which must not take the worker down with it (a runner turns the job's
        # own errors into outcomes).
        if not (isinstance(exc, TimeoutError) and expired):
            return failure(
                "error",
                f"the {kind} runner failed: {type(exc).__name__}: {exc}",
                exception=type(exc).__qualname__,
                traceback=traceback_tail(exc),
            )
    if outcome is None or expired:
        return failure(
            "timeout",
            f"timed out after {definition.timeout:g} s (the definition's timeout)",
            timeout=definition.timeout,
        )
    return check_outputs(definition, outcome) if outcome.ok else outcome


def check_outputs(definition: Definition, outcome: RunOutcome) -> RunOutcome:
    """``outcome`` with its output checked against ``definition.outputs`` (defaults applied)."""
    output: Any = {} if outcome.output is None else outcome.output
    if not definition.outputs and type(output) is dict and not output:
        # Nothing declared, nothing returned (a no-op's outcome): nothing to check or apply.
        return outcome if outcome.output is output else succeeded(output)
    if not isinstance(output, dict):
        got = json_type_name(output)
        return failure("invalid_output", f"outputs must be a JSON object, got {got}")
    context = versioned(definition.uri, definition.version)
    try:
        checked = validate_values(definition.outputs, output, prefix="outputs", context=context)
    except InvalidInput as exc:
        problems = "; ".join(f"{e.path}: {e.message}" for e in exc.errors)
        return failure(
            "invalid_output",
            f"{exc.message}: {problems}",
            errors=[e.as_dict() for e in exc.errors],
        )
    return RunOutcome(ok=True, output=checked)


def _default_runners() -> Mapping[str, Runner]:
    # Imported here: the runner modules import this one.
    from tickwheel.engine.runners import default_runners

    return default_runners()
