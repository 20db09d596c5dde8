"""From a handler's outcome to the result the worker reports: the output kept inline or out of
line by its size, a failure decided under the definition's retry policy."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from tickwheel.domain.backoff import Uniform
from tickwheel.domain.definitions import Definition, RetryPolicy
from tickwheel.domain.models import Execution
from tickwheel.domain.retry import decide_failure, within_deadline
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.engine.runners import RunOutcome
from tickwheel.store.protocol import AttemptResult

# When a definition cannot be found, the failure is permanent: nothing to retry with.
_NO_RETRY = RetryPolicy(max_attempts=1)


_COMPACT = json.JSONEncoder(separators=(",", ":"))
"""The output's JSON as the size is counted: compact, ASCII (``ensure_ascii``), so its length in
characters is its length in bytes. One encoder for all: ``json.dumps`` with any argument builds
one per call."""


def output_size(output: Any) -> int:
    """Bytes of ``output`` as compact JSON: what decides inline or by reference."""
    if type(output) is dict and not output:  # most outputs: nothing to encode
        return 2
    return len(_COMPACT.encode(output))


def output_reference(execution_id: uuid.UUID) -> str:
    """Where an output kept out of line is read: ``GET /v1/executions/{id}/output``."""
    return f"tickwheel://executions/{execution_id}/output"


def attempt_result(
    execution: Execution,
    definition: Definition | None,
    outcome: RunOutcome,
    *,
    max_inline_output: int,
    now: datetime,
    uniform: Uniform,
) -> AttemptResult:
    token = execution.fencing_token
    assert token is not None
    if outcome.ok:
        size = output_size(outcome.output)
        # A large output stays out of the hot executions row; the row keeps a reference.
        large = size > max_inline_output
        return AttemptResult(
            execution.execution_id,
            token,
            AttemptStatus.SUCCEEDED,
            ExecutionStatus.SUCCEEDED,
            output=outcome.output,
            output_reference=output_reference(execution.execution_id) if large else None,
            output_size=size,
        )
    error = {**(outcome.error() or {}), "attempt": execution.attempt_count}
    decision = decide_failure(
        outcome.kind or "error",
        execution.attempt_count,
        execution.max_attempts,
        definition.retry if definition else _NO_RETRY,
        now,
        uniform,
    )
    if execution.deadline is not None:
        decision = within_deadline(decision, execution.deadline)
        if decision.reason:
            error = {**error, "deadline": decision.reason}
    return AttemptResult(
        execution.execution_id,
        token,
        decision.attempt_status,
        decision.execution_status,
        error=error,
        next_attempt_at=decision.next_attempt_at,
    )
