"""Typed views of API responses for SDK users (independent of how the store keeps rows)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tickwheel.client.wire import iso
from tickwheel.domain.states import TERMINAL, AttemptStatus, ExecutionStatus


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


@dataclass(frozen=True)
class ExecutionInfo:
    execution_id: uuid.UUID
    status: ExecutionStatus
    definition_uri: str
    definition_version: int
    inputs: dict[str, Any]
    execute_at: datetime
    priority: int
    idempotency_key: str | None
    attempt_count: int
    max_attempts: int
    next_attempt_at: datetime | None
    output: Any
    output_reference: str | None
    error: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    def to_wire(self) -> dict[str, Any]:
        """Back to the API's JSON shape (camelCase, RFC 3339 times), e.g. for ``--json``."""
        return {
            "executionId": str(self.execution_id),
            "status": str(self.status),
            "definitionUri": self.definition_uri,
            "definitionVersion": self.definition_version,
            "inputs": self.inputs,
            "executeAt": iso(self.execute_at),
            "priority": self.priority,
            "idempotencyKey": self.idempotency_key,
            "attemptCount": self.attempt_count,
            "maxAttempts": self.max_attempts,
            "nextAttemptAt": iso(self.next_attempt_at),
            "output": self.output,
            "outputReference": self.output_reference,
            "error": self.error,
            "createdAt": iso(self.created_at),
            "updatedAt": iso(self.updated_at),
            "startedAt": iso(self.started_at),
            "finishedAt": iso(self.finished_at),
        }

    @classmethod
    def from_wire(cls, w: dict[str, Any]) -> ExecutionInfo:
        execute_at, created, updated = (
            _time(w["executeAt"]),
            _time(w["createdAt"]),
            _time(w["updatedAt"]),
        )
        assert execute_at and created and updated
        return cls(
            execution_id=uuid.UUID(w["executionId"]),
            status=ExecutionStatus(w["status"]),
            definition_uri=w["definitionUri"],
            definition_version=w["definitionVersion"],
            inputs=w["inputs"],
            execute_at=execute_at,
            priority=w["priority"],
            idempotency_key=w.get("idempotencyKey"),
            attempt_count=w["attemptCount"],
            max_attempts=w["maxAttempts"],
            next_attempt_at=_time(w.get("nextAttemptAt")),
            output=w.get("output"),
            output_reference=w.get("outputReference"),
            error=w.get("error"),
            created_at=created,
            updated_at=updated,
            started_at=_time(w.get("startedAt")),
            finished_at=_time(w.get("finishedAt")),
        )


@dataclass(frozen=True)
class AttemptInfo:
    attempt_number: int
    status: AttemptStatus
    worker_id: str
    fencing_token: int
    started_at: datetime
    finished_at: datetime | None
    error: dict[str, Any] | None

    def to_wire(self) -> dict[str, Any]:
        return {
            "attemptNumber": self.attempt_number,
            "status": str(self.status),
            "workerId": self.worker_id,
            "fencingToken": self.fencing_token,
            "startedAt": iso(self.started_at),
            "finishedAt": iso(self.finished_at),
            "error": self.error,
        }

    @classmethod
    def from_wire(cls, w: dict[str, Any]) -> AttemptInfo:
        started = _time(w["startedAt"])
        assert started is not None
        return cls(
            attempt_number=w["attemptNumber"],
            status=AttemptStatus(w["status"]),
            worker_id=w["workerId"],
            fencing_token=w["fencingToken"],
            started_at=started,
            finished_at=_time(w.get("finishedAt")),
            error=w.get("error"),
        )


@dataclass(frozen=True)
class ExecutionPage:
    items: list[ExecutionInfo]
    next_cursor: str | None


@dataclass(frozen=True)
class BatchItemResult:
    """One item of a batch submission: ``status`` is 201 (created), 200 (same key, same
    request), 409 (key used for another request) or 422 (invalid)."""

    status: int
    execution: ExecutionInfo | None
    error: dict[str, Any] | None

    @property
    def ok(self) -> bool:
        return self.status in (200, 201)

    @classmethod
    def from_wire(cls, w: dict[str, Any]) -> BatchItemResult:
        execution = w.get("execution")
        return cls(
            status=int(w["status"]),
            execution=ExecutionInfo.from_wire(execution) if execution else None,
            error=w.get("error"),
        )


@dataclass(frozen=True)
class DefinitionApplied:
    definition: dict[str, Any]
    created: bool
