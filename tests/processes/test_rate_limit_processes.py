"""A rate limit across worker processes on one PostgreSQL: three workers drain a definition
limited to 20 starts a second (burst 10) beside an unlimited one. The limited executions' start
instants (the database's clock, written by each claim) never exceed the token bucket's bound,
whichever process started them, and the unlimited ones are not held back."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.processes.conftest import Cluster, job_doc, register, run
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.domain.submission import SubmitRequest

pytestmark = pytest.mark.postgres

LIMIT, BURST, N = 20, 10, 70


def submit_all(url: str) -> list[uuid.UUID]:
    requests = [SubmitRequest("registry://jobs/limited") for _ in range(N)] + [
        SubmitRequest("registry://jobs/free") for _ in range(N)
    ]

    async def work(transport: InProcessTransport) -> list[uuid.UUID]:
        items = await transport.submit_many(requests)
        assert all(item["status"] == 201 for item in items), items[:3]
        return [uuid.UUID(str(item["execution"]["executionId"])) for item in items]

    made: list[uuid.UUID] = run(work, url)
    return made


def test_three_worker_processes_share_one_budget(cluster: Cluster) -> None:
    limited = job_doc("limited", "noop")
    limited["rateLimit"] = {"limit": LIMIT, "period": "1s", "burst": BURST}
    register(cluster.url, limited)
    register(cluster.url, job_doc("free", "noop"))
    cluster.scheduler()
    workers = [cluster.worker(f"w{i}", concurrency=8) for i in range(3)]
    cluster.wait_listening(4)
    began = time.monotonic()
    submit_all(cluster.url)

    def succeeded() -> int:
        return cluster.db.status_counts().get("SUCCEEDED", 0)

    cluster.eventually(lambda: succeeded() == 2 * N, 40, "every execution to succeed")
    took = time.monotonic() - began
    rows = cluster.db.rows(
        "SELECT e.definition_uri, a.worker_id, a.started_at FROM attempts a"
        " JOIN executions e USING (execution_id) ORDER BY a.started_at"
    )
    starts = [r["started_at"] for r in rows if r["definition_uri"] == "registry://jobs/limited"]
    free = [r["started_at"] for r in rows if r["definition_uri"] == "registry://jobs/free"]
    assert len(starts) == N and len(free) == N
    by_worker = {r["worker_id"] for r in rows if r["definition_uri"] == "registry://jobs/limited"}
    first = starts[0]
    for n, at in enumerate(starts, start=1):
        elapsed = (at - first).total_seconds()
        assert n <= BURST + LIMIT * elapsed + 1e-6, (n, elapsed)
    span = (starts[-1] - first).total_seconds()
    # 70 at 20 a second after a burst of 10: at least 3 s; the free ones finished long before.
    assert span >= (N - BURST) / LIMIT - 0.05
    assert (free[-1] - free[0]).total_seconds() < span
    print(
        f"\n{N} limited starts over {span:.2f} s by {sorted(by_worker)}, {N} free within"
        f" {(free[-1] - free[0]).total_seconds():.2f} s; all done in {took:.1f} s"
    )
    assert all(w.alive for w in workers)
