"""The stored things, as plain frozen dataclasses shared by every layer."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Generic, TypeVar

from tickwheel.domain.concurrency import Concurrency
from tickwheel.domain.scopes import Scope as Scope  # re-exported: its home was here
from tickwheel.domain.states import AttemptStatus, ExecutionStatus


@dataclass(frozen=True)
class Execution:
    execution_id: uuid.UUID
    tenant: str
    definition_uri: str
    definition_version: int
    inputs: dict[str, Any]
    execute_at: datetime
    status: ExecutionStatus
    priority: int
    attempt_count: int
    max_attempts: int
    shard_id: int
    bucket_start: datetime
    created_at: datetime
    updated_at: datetime
    idempotency_key: str | None = None
    request_fingerprint: str | None = None
    next_attempt_at: datetime | None = None
    ready_at: datetime | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    fencing_token: int | None = None
    output: Any = None
    output_reference: str | None = None
    error: dict[str, Any] | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    cancel_requested_at: datetime | None = None
    """When a cancel of this execution was asked while it ran (its worker stops it)."""
    progress: dict[str, Any] | None = None
    """The handler's last report: ``{"fraction", "message", "at"}`` (domain/running.py)."""
    checkpoint: Any = None
    """The handler's last checkpoint, handed to the next attempt."""
    trace_context: dict[str, str] | None = None
    """The submitter's W3C trace context, continued by each attempt (docs/tracing.md); internal:
    not part of the API's answer."""
    start_by: datetime | None = None
    """Not started by then: EXPIRED (docs/flow-control.md)."""
    deadline: datetime | None = None
    """No attempt starts after it."""
    concurrency: Concurrency | None = None
    """Its concurrency group's key, limit and order, fixed at submit (None: unlimited)."""


@dataclass(frozen=True)
class Attempt:
    execution_id: uuid.UUID
    attempt_number: int
    worker_id: str
    fencing_token: int
    status: AttemptStatus
    started_at: datetime
    finished_at: datetime | None = None
    error: dict[str, Any] | None = None


class ExecutionEventKind(StrEnum):
    """What the history of an execution records besides its attempts (past tense, as events)."""

    CANCELLED = "cancelled"
    CANCEL_REQUESTED = "cancel_requested"
    """A cancel was asked while it ran: its worker stops it at its next heartbeat."""
    REPLAYED = "replayed"
    EXPIRED = "expired"
    """Not started by its startBy (or deadline): it ended EXPIRED without running."""


@dataclass(frozen=True)
class ExecutionEvent:
    execution_id: uuid.UUID
    kind: ExecutionEventKind
    at: datetime
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ApiKey:
    key_id: str
    tenant: str
    scope: Scope
    name: str
    created_at: datetime
    revoked_at: datetime | None = None


@dataclass(frozen=True)
class ExecutionFilter:
    """Filters of the execution list; all optional, combined with AND."""

    statuses: tuple[ExecutionStatus, ...] = ()
    definition_uri: str | None = None
    idempotency_key: str | None = None
    idempotency_key_prefix: str | None = None
    """Keys starting with this text (a cron job's executions: ``cron:<cronJobId>:``)."""
    execute_from: datetime | None = None
    execute_to: datetime | None = None


T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None


@dataclass(frozen=True)
class ShardLease:
    """A scheduler's time-limited grant of one shard. ``epoch`` is the grant's number: every
    guarded write the holder makes names it, so a grant that was lost changes nothing."""

    shard_id: int
    owner: str
    epoch: int
    expires_at: datetime
    watermark: datetime | None = None
