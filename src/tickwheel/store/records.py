"""The records the store protocols take and return, apart from the protocols so that each
protocol module (and ``protocol.py``, which joins them into ``Store``) can import them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from tickwheel.domain.definitions import Definition
from tickwheel.domain.models import Execution
from tickwheel.domain.states import (
    AttemptStatus,
    ExecutionStatus,
    require_attempt_transition,
    require_transition,
)

SHARED = ""
"""The owner of the shared registry's definitions and workflows (published by the operator)."""


@dataclass(frozen=True)
class StoredDefinition:
    definition: Definition
    content_hash: str
    created_at: datetime
    owner: str
    """The tenant that registered it, or ``SHARED`` (''): the operator's shared registry."""


@dataclass(frozen=True)
class InsertOutcome:
    """``created`` is False when the (tenant, idempotency key) already named an execution; then
    ``execution`` is that earlier one and the caller compares fingerprints."""

    execution: Execution
    created: bool


@dataclass(frozen=True)
class AttemptResult:
    """What a worker reports about its attempt. The write is accepted only while the execution is
    still RUNNING under ``fencing_token``: a zombie with an older token changes nothing."""

    execution_id: uuid.UUID
    fencing_token: int
    attempt_status: AttemptStatus
    execution_status: ExecutionStatus
    output: Any = None
    output_reference: str | None = None
    error: dict[str, Any] | None = None
    next_attempt_at: datetime | None = None
    lease_expired_only: bool = False
    """The reaper's guard: write only if the lease is still expired (a late heartbeat wins)."""
    output_size: int = 0
    """Size of the output as JSON; with ``output_reference`` set, the store keeps the output
    out of the executions row, in its own table."""

    def __post_init__(self) -> None:
        # Only a RUNNING execution and its RUNNING attempt are finished (or reaped), and the
        # store's update writes whatever status it is given: the table decides which it may be.
        require_transition(ExecutionStatus.RUNNING, self.execution_status)
        require_attempt_transition(AttemptStatus.RUNNING, self.attempt_status)


@dataclass(frozen=True)
class WorkerInfo:
    """A worker's row of the registry, as it last reported itself."""

    worker_id: str
    host: str
    pid: int
    concurrency: int
    started_at: datetime
    last_heartbeat_at: datetime
    running: int
    stopped_at: datetime | None


class Topic(StrEnum):
    """Wake-up signals between processes. They are hints: a woken service always re-queries."""

    DUE = "due"
    """An execution was inserted SCHEDULED: a scheduler may need to wake before it planned to."""
    READY = "ready"
    """Executions became READY (inserted due, promoted, replayed, released): workers, claim."""
    WORKFLOW = "workflow"
    """A workflow's execution finished (an outbox row was written): orchestrators, consume."""
    CANCEL = "cancel"
    """A cancel of a RUNNING execution was requested: workers, beat now rather than later."""
    WEBHOOK = "webhook"
    """Webhook deliveries were written (outbox rows of a dead letter, a cron occurrence, a failed
    workflow run): senders, claim."""
    CRON = "cron"
    """A cron job was created, changed, resumed or given back by a failed tick: Cron Services,
    which sleep until their next due job, look again."""
