"""Turns the StatsStore's bounded aggregates into what the overview draws.

Percentiles are computed here, in Python, from a capped sample of first starts: the two SQL
dialects disagree on percentile functions, and a sample of a few thousand rows gives p50/p99
well within what a chart can show. When the sample is cut by its cap, the series says so."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from tickwheel.domain.states import ExecutionStatus
from tickwheel.store.stats_protocol import StatsStore

WINDOW = timedelta(hours=1)
SAMPLE_LIMIT = 20_000
STATUSES = [str(s) for s in ExecutionStatus]


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return None
    rank = max(0, min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1))))
    return sorted_values[rank]


def _minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


async def counts(stats: StatsStore, tenant: str, now: datetime) -> dict[str, Any]:
    """The live snapshot: counts by status and the backlog's age. One query."""
    rows = await stats.stats_status_counts(tenant)
    by_status = dict.fromkeys(STATUSES, 0)
    oldest_ready: datetime | None = None
    for row in rows:
        by_status[row.status] = row.count
        if row.status == ExecutionStatus.READY:
            oldest_ready = row.oldest_ready_at
    age = (now - oldest_ready).total_seconds() if oldest_ready else None
    return {
        "counts": by_status,
        "total": sum(by_status.values()),
        "oldestReadyAgeSeconds": max(0.0, age) if age is not None else None,
        "at": now.isoformat(),
    }


async def series(stats: StatsStore, tenant: str, now: datetime) -> dict[str, Any]:
    """Per minute over the last hour: executions started per second, lateness p50/p99 (s)."""
    since = _minute(now - WINDOW) + timedelta(minutes=1)
    per_minute = {m.minute: m.count for m in await stats.stats_starts_per_minute(tenant, since)}
    sample = await stats.stats_start_sample(tenant, since, SAMPLE_LIMIT)
    lateness: dict[datetime, list[float]] = {}
    for row in sample:
        late = max(0.0, (row.started_at - row.execute_at).total_seconds())
        lateness.setdefault(_minute(row.started_at), []).append(late)
    points = []
    minute = since
    while minute <= now:
        values = sorted(lateness.get(minute, []))
        points.append(
            {
                "minute": minute.isoformat(),
                "startsPerSecond": round(per_minute.get(minute, 0) / 60.0, 3),
                "latenessP50": percentile(values, 0.5),
                "latenessP99": percentile(values, 0.99),
            }
        )
        minute += timedelta(minutes=1)
    return {"points": points, "sampled": len(sample) >= SAMPLE_LIMIT}


async def workers(stats: StatsStore, tenant: str) -> list[dict[str, Any]]:
    """No worker registry exists yet: what the store can tell is who holds RUNNING leases."""
    return [
        {
            "workerId": o.worker_id,
            "running": o.running,
            "latestLeaseExpiresAt": o.latest_lease_expires_at.isoformat()
            if o.latest_lease_expires_at
            else None,
            "oldestStartedAt": o.oldest_started_at.isoformat() if o.oldest_started_at else None,
        }
        for o in await stats.stats_lease_owners(tenant)
    ]
