"""Running work in the store (issue 14): a cancel request on a RUNNING execution, the heartbeat
that carries a handler's progress and checkpoint and answers the request, and a snooze. Part of
``Store``; apart so that the protocol stays readable."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from tickwheel.domain.models import Execution


@dataclass(frozen=True)
class Beat:
    """A heartbeat's answer while the token is still current."""

    cancel_requested: bool
    """A cancel was asked: stop the attempt and finish it CANCELLED."""


class RunningStore(Protocol):
    async def execution_beat(
        self,
        execution_id: uuid.UUID,
        fencing_token: int,
        lease: timedelta,
        now: datetime | None = None,
        *,
        progress: dict[str, Any] | None = None,
        checkpoint: Any = None,
    ) -> Beat | None:
        """``execution_heartbeat`` that also writes the handler's latest ``progress`` and
        ``checkpoint`` (None: keep the stored one) and answers whether a cancel was asked;
        None, and nothing written, when the token is no longer current."""
        ...

    async def execution_cancel_request(
        self, tenant: str, execution_id: uuid.UUID, now: datetime
    ) -> Execution | None:
        """Asks the worker of a RUNNING execution to stop it (``cancel_requested_at``, kept from
        the first request; a ``cancel_requested`` history event). None when it is not RUNNING."""
        ...

    async def execution_snooze(
        self,
        execution_id: uuid.UUID,
        fencing_token: int,
        until: datetime,
        detail: dict[str, Any],
        now: datetime | None = None,
    ) -> bool:
        """RUNNING -> RETRY_WAIT until ``until`` without burning an attempt (the budget grows by
        one); the attempt is ABANDONED with ``detail`` (kind "snoozed") as its error. False,
        and nothing written, when the token is stale."""
        ...
