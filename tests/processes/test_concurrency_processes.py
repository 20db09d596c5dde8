"""Concurrency keys with real processes: four workers, 2,000 executions over 50 keys with
limit 1 and order fifo. Never two of one key at once (the attempts' intervals in the store, by
the database's one clock, and the handlers' own journal), each key in submission order, and
nothing lost when a worker is SIGKILLed mid-run (its attempts are reaped after the lease and
keep their place)."""

from __future__ import annotations

import itertools
import signal
import time
import uuid
from collections import defaultdict
from datetime import timedelta
from typing import Any

import pytest

from tests.processes.conftest import Cluster, job_doc, register, run
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.domain.submission import SubmitRequest

pytestmark = pytest.mark.postgres

KEYS, PER_KEY = 50, 40
# Half a handler (100 ms, tests/processes/jobs.py keyed): two attempts of a key running at once
# would overlap by a whole one. The instants are statement starts, before planning: on a loaded
# machine 10 ms was exceeded once (10.5 ms), then 25 ms (28 ms, the handler then 50 ms long).
SLACK = timedelta(milliseconds=50)


def submit_all(url: str) -> dict[uuid.UUID, tuple[str, int]]:
    """Round-robin over the keys, each key's n ascending: one process, so the ids (uuid7) and
    executeAt (now) ascend in submission order, the FIFO order of each key."""
    requests = [
        SubmitRequest("registry://jobs/keyed", inputs={"customer": f"c{k:02}", "n": n})
        for n in range(PER_KEY)
        for k in range(KEYS)
    ]

    async def work(transport: InProcessTransport) -> dict[uuid.UUID, tuple[str, int]]:
        made: dict[uuid.UUID, tuple[str, int]] = {}
        for start in range(0, len(requests), 500):
            chunk = requests[start : start + 500]
            for request, item in zip(chunk, await transport.submit_many(chunk), strict=True):
                assert item["status"] == 201, item
                key = (request.inputs["customer"], request.inputs["n"])
                made[uuid.UUID(str(item["execution"]["executionId"]))] = key
        return made

    made: dict[uuid.UUID, tuple[str, int]] = run(work, url)
    return made


def test_limit_one_per_key_holds_across_four_workers_and_a_sigkill(cluster: Cluster) -> None:
    doc = job_doc("keyed", "keyed", inputs={"customer": "string", "n": "integer"}, max_attempts=5)
    doc["concurrency"] = {"key": "${{ inputs.customer }}", "limit": 1, "order": "fifo"}
    register(cluster.url, doc)
    cluster.scheduler()
    workers = [cluster.worker(f"w{i}", concurrency=8, lease=2) for i in range(4)]
    cluster.wait_listening(5)
    started = time.monotonic()
    made = submit_all(cluster.url)
    assert len(made) == KEYS * PER_KEY

    def succeeded() -> int:
        return cluster.db.status_counts().get("SUCCEEDED", 0)

    cluster.eventually(lambda: succeeded() >= 500, 40, "500 executions to succeed")
    victim = workers[0]
    victim.send(signal.SIGKILL)
    assert victim.popen.wait(timeout=5) == -signal.SIGKILL
    killed_at = time.monotonic()
    cluster.eventually(lambda: succeeded() == len(made), 50, "every execution to succeed")
    print(
        f"\n{len(made)} executions over {KEYS} keys, limit 1: done in"
        f" {time.monotonic() - started:.1f} s; w0 killed"
        f" {time.monotonic() - killed_at:.1f} s before the end"
    )

    # The store: every attempt of a key one after the other, and in submission order; the
    # retries kept their place. The instants are the database's now() of each transaction, taken
    # at its start: a claim's comes before its planning (about a millisecond) and its snapshot,
    # so it may precede the commit of the finish whose freed slot it then sees by that much.
    # Two attempts of a key really running at once would overlap by a whole handler (100 ms).
    attempts = cluster.db.rows(
        "SELECT a.execution_id, a.attempt_number, a.worker_id, a.status, a.started_at,"
        " a.finished_at,"
        " e.concurrency_key FROM attempts a JOIN executions e USING (execution_id)"
        " ORDER BY e.concurrency_key, a.started_at, a.attempt_number"
    )
    by_key: dict[str, list[Any]] = defaultdict(list)
    for a in attempts:
        by_key[a["concurrency_key"]].append(a)
    assert sorted(by_key) == [f"c{k:02}" for k in range(KEYS)]
    lost = 0
    for key, rows in by_key.items():
        for before, after in itertools.pairwise(rows):
            assert before["finished_at"] is not None
            assert after["started_at"] >= before["finished_at"] - SLACK, (key, before, after)
        order = [made[r["execution_id"]][1] for r in rows]
        assert order == sorted(order), (key, order)
        assert sorted(set(order)) == list(range(PER_KEY))
        lost += sum(1 for r in rows if r["status"] == "ABANDONED")
        assert all(r["worker_id"] == "w0" for r in rows if r["status"] == "ABANDONED")
    assert cluster.db.rows("SELECT count(*) AS n FROM concurrency_holds")[0]["n"] == 0

    # The handlers' journal (one monotonic clock for all processes): no two of a key overlap. An
    # attempt of the killed worker ended at the kill at the latest.
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    records = cluster.journal.records()
    ends = {(r.execution_id, r.attempt): r.mono for r in records if r.event == "end"}
    for r in records:
        if r.event == "start":
            customer, _ = made[uuid.UUID(r.execution_id)]
            end = ends.get((r.execution_id, r.attempt))
            assert end is not None or r.pid == victim.pid, r
            spans[customer].append((r.mono, end if end is not None else killed_at))
    for customer, intervals in spans.items():
        intervals.sort()
        for (_, end), (start, _) in itertools.pairwise(intervals):
            assert start >= end, customer
    # Each attempt the kill cut short was reaped (ABANDONED) and run again, not lost.
    cut = sum(1 for r in records if r.event == "start" and r.pid == victim.pid
              and (r.execution_id, r.attempt) not in ends)  # fmt: skip
    print(f"w0's attempts cut short by the kill: {cut}; reaped ABANDONED: {lost}")
    assert lost >= cut
