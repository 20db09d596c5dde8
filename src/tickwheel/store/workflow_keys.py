"""How a workflow's task run is named in its execution's idempotency key. Apart from the
workflow store's protocol, whose domain (the workflow documents and their parsers) the claims'
finish never needs: it only reads a key's prefix."""

from __future__ import annotations

import uuid

WORKFLOW_KEY_PREFIX = "wf:"


def workflow_run_of_key(idempotency_key: str | None) -> uuid.UUID | None:
    """The run id in a task run's idempotency key ``wf:<runId>:<task>[:<retry>]``, else None."""
    if idempotency_key is None or not idempotency_key.startswith(WORKFLOW_KEY_PREFIX):
        return None
    try:
        return uuid.UUID(idempotency_key.split(":", 2)[1])
    except (IndexError, ValueError):
        return None
