"""The expression preview of the cron API (``GET /v1/cron/preview``, ``tickwheel cron
preview``): the next firings of an expression in a zone under a DST policy, for people writing
one. Nothing is stored and no job is involved."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tickwheel.client.cron_wire import Wire, preview_to_wire
from tickwheel.client.wire import iso
from tickwheel.domain.cron import DstPolicy, preview
from tickwheel.domain.errors import FieldError, InvalidInput

MAX_PREVIEW = 100


def preview_document(
    expression: str,
    timezone: str,
    start: datetime,
    count: int,
    dst_policy: dict[str, Any] | None = None,
) -> Wire:
    if not 1 <= count <= MAX_PREVIEW:
        message = f"must be between 1 and {MAX_PREVIEW}"
        raise InvalidInput(f"count {message}", [FieldError("count", message)])
    policy = DstPolicy.from_document(dst_policy)
    rows = preview(expression, timezone, start, count, policy)
    return {
        "expression": expression,
        "timezone": timezone,
        "from": iso(start),
        "dstPolicy": policy.to_document(),
        "items": [preview_to_wire(r) for r in rows],
    }
