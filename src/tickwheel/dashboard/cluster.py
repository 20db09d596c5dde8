"""The Cluster page: workers from the registry (alive or stale), and the schedulers with the
shards each one leases.

Workers are not per tenant (a worker serves every tenant), so the page shows the whole
registry; the leases column counts only the RUNNING executions of the session's tenant."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from tickwheel.api.deps import app_state
from tickwheel.dashboard import stats
from tickwheel.dashboard.session import Session
from tickwheel.dashboard.views import render, session_of
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.engine.worker import ALIVE_WITHIN

router = APIRouter(prefix="/dashboard", include_in_schema=False)
Sess = Annotated[Session, Depends(session_of)]
SHOWN_FOR = timedelta(hours=1)
"""Workers stopped or silent for longer than this drop off the page (the registry keeps them)."""


def _state(last: float, stopped: bool) -> str:
    if stopped:
        return "stopped"
    return "alive" if last <= ALIVE_WITHIN else "stale"


@router.get("/cluster")
async def cluster(request: Request, session: Sess) -> Response:
    state = app_state(request)
    now = state.clock.now()
    registry = await state.store.worker_list(now - SHOWN_FOR)
    feed = request.app.state.dashboard_hub.feed(session.principal.tenant)
    leases = {w["workerId"]: w["running"] for w in await stats.workers(feed.stats, feed.tenant)}
    workers: list[dict[str, Any]] = []
    for w in registry:
        ago = max(0.0, (now - w.last_heartbeat_at).total_seconds())
        workers.append(
            {
                "id": w.worker_id,
                "host": w.host,
                "pid": w.pid,
                "concurrency": w.concurrency,
                "running": w.running,
                "leases": leases.get(w.worker_id, 0),
                "startedAt": w.started_at.isoformat(),
                "lastHeartbeatAt": w.last_heartbeat_at.isoformat(),
                "ago": round(ago),
                "state": _state(ago, w.stopped_at is not None),
            }
        )
    workers.sort(key=lambda w: (w["state"] != "alive", w["id"]))
    # Leases are decided by the database's clock, like the schedulers' own view of them.
    counts = await state.store.shard_lease_counts(None)
    schedulers = [
        {"owner": owner, "shards": held, "share": round(100 * held / SHARD_COUNT, 1)}
        for owner, held in sorted(counts.items())
    ]
    return render(
        request,
        "cluster.html",
        session,
        workers=workers,
        alive=sum(1 for w in workers if w["state"] == "alive"),
        alive_within=int(ALIVE_WITHIN),
        shown_hours=int(SHOWN_FOR.total_seconds() // 3600),
        schedulers=schedulers,
        unowned=SHARD_COUNT - sum(counts.values()) if counts else SHARD_COUNT,
    )
