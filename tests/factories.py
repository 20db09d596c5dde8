"""Small builders for test data, so each test states only what it is about."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tickwheel.domain.definitions import Definition, content_hash, definition_from_document
from tickwheel.domain.submission import NewExecution, SubmitRequest, prepare_execution
from tickwheel.store.protocol import SHARED, StoredDefinition

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def definition_doc(name: str = "greet", version: int = 1, **overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": name,
        "version": version,
        "description": "Say hello",
        "inputs": {"name": "string", "times": {"type": "integer", "default": 1}},
        "outputs": {"greeting": "string"},
        "execution": {"type": "python", "entrypoint": "tickwheel.examples.jobs:greet"},
        "timeout": 30,
        "retry": {"maxAttempts": 4, "baseDelay": 1, "maxDelay": 60},
    }
    doc.update(overrides)
    return doc


def definition(name: str = "greet", version: int = 1, **overrides: Any) -> Definition:
    return definition_from_document(definition_doc(name, version, **overrides))


def stored(d: Definition, at: datetime = T0, owner: str = SHARED) -> StoredDefinition:
    """Shared (the operator's registry) unless ``owner`` names a tenant."""
    return StoredDefinition(definition=d, content_hash=content_hash(d), created_at=at, owner=owner)


def new_execution(
    tenant: str = "acme",
    *,
    key: str | None = None,
    inputs: dict[str, Any] | None = None,
    execute_in: float | None = None,
    now: datetime = T0,
    priority: int = 0,
    d: Definition | None = None,
) -> NewExecution:
    request = SubmitRequest(
        definition_uri="registry://jobs/greet",
        inputs=inputs if inputs is not None else {"name": "Ada"},
        execute_at=now + timedelta(seconds=execute_in) if execute_in is not None else None,
        priority=priority,
        idempotency_key=key,
    )
    return prepare_execution(request, d or definition(), tenant, now)
