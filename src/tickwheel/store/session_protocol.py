"""The SessionStore protocol: the dashboard's sign-in sessions, kept in the database so that a
sign-out holds on every API process behind one address.

Apart from ``Store`` like the other groups of tables: only the dashboard uses it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from tickwheel.domain.models import ApiKey


@dataclass(frozen=True)
class DashboardSession:
    key: ApiKey | None
    """The API key that signed in; None for a session made without keys (--insecure-no-auth)."""
    expires_at: datetime


class SessionStore(Protocol):
    async def dashboard_session_insert(
        self, session_hash: str, key_id: str | None, created_at: datetime, expires_at: datetime
    ) -> None: ...

    async def dashboard_session_get(
        self, session_hash: str, now: datetime
    ) -> DashboardSession | None:
        """The session if it exists, has not expired at ``now`` and its key is not revoked."""
        ...

    async def dashboard_session_delete(self, session_hash: str) -> bool:
        """Ends one session (sign-out); False if there was none."""
        ...

    async def dashboard_session_prune(self, now: datetime) -> int:
        """Deletes the sessions expired at ``now``; returns how many."""
        ...
