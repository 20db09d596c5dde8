"""The StatsStore protocol: the few bounded, read-only aggregates the dashboard shows.

Kept apart from ``Store`` so that the scheduler's hot interface does not grow with every chart.
Every query is scoped to one tenant and walks an index (``executions_tenant_status``,
``executions_tenant_started``); the time series read at most one hour of starts, and the lateness
sample is capped by ``limit``, so the cost is bounded whatever the table holds."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class StatusCount:
    status: str
    count: int
    oldest_ready_at: datetime | None
    """For READY only: the longest-waiting execution's ``ready_at`` (the backlog's age)."""


@dataclass(frozen=True)
class MinuteCount:
    minute: datetime
    count: int


@dataclass(frozen=True)
class StartSample:
    started_at: datetime
    execute_at: datetime


@dataclass(frozen=True)
class LeaseOwner:
    """What the store knows of a worker: the RUNNING executions it holds a lease on."""

    worker_id: str
    running: int
    latest_lease_expires_at: datetime | None
    oldest_started_at: datetime | None


class StatsStore(Protocol):
    async def stats_status_counts(self, tenant: str) -> list[StatusCount]:
        """One grouped query: the live counts (the SSE tick runs only this)."""
        ...

    async def stats_starts_per_minute(self, tenant: str, since: datetime) -> list[MinuteCount]:
        """Executions whose first attempt started at or after ``since``, by minute."""
        ...

    async def stats_start_sample(
        self, tenant: str, since: datetime, limit: int
    ) -> list[StartSample]:
        """The newest ``limit`` first starts since ``since``, for lateness percentiles."""
        ...

    async def stats_lease_owners(self, tenant: str) -> list[LeaseOwner]: ...
