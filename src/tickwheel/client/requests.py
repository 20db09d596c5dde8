"""What the SDK builds before it sends: where to, the definition's URI, the submit request."""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from tickwheel.domain.definition_refs import to_uri
from tickwheel.domain.submission import SubmitRequest

ExecutionRef = uuid.UUID | str
DEFAULT_URL = "http://127.0.0.1:8000"


def connection_settings(url: str | None, api_key: str | None) -> tuple[str, str | None]:
    """Where to send requests and with which key: the arguments given, else ``TICKWHEEL_URL``
    and ``TICKWHEEL_API_KEY`` (the variables the CLI and the README's tour use), else the local
    server and no key. An argument given explicitly always wins, ``api_key=""`` included (no
    key, whatever the environment says)."""
    resolved_url = url or os.environ.get("TICKWHEEL_URL") or DEFAULT_URL
    if api_key is None:
        api_key = os.environ.get("TICKWHEEL_API_KEY") or None
    return resolved_url, api_key or None


def definition_uri(definition: str) -> str:
    """Accepts ``registry://jobs/<name>`` or the bare name."""
    return to_uri(definition)


def submit_request(
    definition: str,
    inputs: dict[str, Any] | None,
    execute_at: datetime | None,
    idempotency_key: str | None,
    *,
    version: int | None,
    priority: int,
) -> SubmitRequest:
    return SubmitRequest(
        definition_uri=definition_uri(definition),
        inputs=inputs or {},
        definition_version=version,
        execute_at=execute_at,
        priority=priority,
        idempotency_key=idempotency_key,
    )


def as_id(ref: ExecutionRef) -> uuid.UUID:
    return ref if isinstance(ref, uuid.UUID) else uuid.UUID(ref)


def with_uris(requests: Iterable[SubmitRequest]) -> list[SubmitRequest]:
    """The requests with each definition named by its URI (a bare name is accepted)."""
    out = []
    for r in requests:
        uri = definition_uri(r.definition_uri)
        # Frozen: a request already naming its URI is used as it is, not copied.
        out.append(r if uri == r.definition_uri else dataclasses.replace(r, definition_uri=uri))
    return out
