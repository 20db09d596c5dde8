"""Throughput and timing with real processes on PostgreSQL: several workers draining a batch
without ever running one execution twice at once, and executions handed to a worker within a
second of their ``executeAt``. The numbers are printed (run with ``-s``) and the precision ones
are written to ``precision.json`` in the test's temporary folder."""

from __future__ import annotations

import itertools
import json
import math
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from tests.processes.conftest import Cluster, Record, job_doc, register, submit

pytestmark = pytest.mark.postgres

DRAIN_COUNT = 5_000
DRAIN_WORKERS = 4


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile of ``values`` (0 < p <= 100)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def test_four_workers_drain_5000_executions_without_overlap(cluster: Cluster) -> None:
    register(cluster.url, job_doc("noop", "noop", max_attempts=3))
    cluster.scheduler()
    workers = {
        f"w{i}": cluster.worker(f"w{i}", concurrency=8, lease=5)
        for i in range(1, DRAIN_WORKERS + 1)
    }
    cluster.wait_listening(1 + DRAIN_WORKERS)

    started = time.monotonic()
    ids = submit(cluster.url, "noop", DRAIN_COUNT, chunk=1000)
    submitted = time.monotonic()
    cluster.eventually(
        lambda: cluster.db.status_counts() == {"SUCCEEDED": DRAIN_COUNT},
        60,
        f"all {DRAIN_COUNT} executions to succeed",
    )
    done = time.monotonic()

    records = cluster.journal.records()
    span = max(r.mono for r in records) - min(r.mono for r in records)
    wall = done - started
    by_pid = Counter(r.pid for r in records if r.event == "end")
    print(
        f"\ndrain: {DRAIN_COUNT} executions, {DRAIN_WORKERS} workers x 8: submitted in "
        f"{submitted - started:.2f} s, all SUCCEEDED {wall:.2f} s after the first submit "
        f"({DRAIN_COUNT / wall:.0f}/s); handlers' first start to last end {span:.2f} s "
        f"({DRAIN_COUNT / span:.0f}/s); per worker {sorted(by_pid.values())}"
    )

    # No execution left behind, each with exactly one SUCCEEDED attempt and none still RUNNING.
    assert len(set(ids)) == DRAIN_COUNT
    rows = cluster.db.rows(
        "SELECT e.execution_id, e.fencing_token, e.attempt_count,"
        " count(*) FILTER (WHERE a.status = 'SUCCEEDED') AS succeeded,"
        " count(*) FILTER (WHERE a.status = 'RUNNING') AS running,"
        " count(a.*) AS attempts,"
        " (array_agg(a.worker_id) FILTER (WHERE a.status = 'SUCCEEDED'))[1] AS winner"
        " FROM executions e LEFT JOIN attempts a USING (execution_id)"
        " GROUP BY e.execution_id"
    )
    assert {r["execution_id"] for r in rows} == set(ids)
    bad = [r for r in rows if r["succeeded"] != 1 or r["running"] or r["attempts"] < 1]
    assert not bad, f"{len(bad)} executions without exactly one SUCCEEDED attempt: {bad[:5]}"
    retried = [r for r in rows if r["attempts"] > 1]
    print(f"drain: executions with more than one attempt: {len(retried)}")

    # From the handlers' own records: no two attempts of one execution ever overlapped, and
    # the winning attempt ran, to its end, in the worker the database names.
    intervals: dict[str, dict[int, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        intervals[r.execution_id][r.token].append(r)
    assert set(intervals) == {str(i) for i in ids}
    pid_of = {name: proc.pid for name, proc in workers.items()}
    for row in rows:
        attempts = intervals[str(row["execution_id"])]
        spans: list[tuple[float, float, int]] = []
        for token, recs in attempts.items():
            start = [r for r in recs if r.event == "start"]
            end = [r for r in recs if r.event == "end"]
            assert len(start) == 1 and len(end) <= 1, recs
            assert len({r.pid for r in recs}) == 1, recs
            spans.append((start[0].mono, end[0].mono if end else math.inf, token))
        spans.sort()
        for (_, end_a, token_a), (start_b, _, token_b) in itertools.pairwise(spans):
            assert end_a <= start_b, (
                f"attempts {token_a} and {token_b} of {row['execution_id']} overlapped"
            )
        winner = attempts[int(row["fencing_token"])]
        assert [r.event for r in winner] == ["start", "end"]
        assert winner[0].pid == pid_of[row["winner"]]


def test_executions_start_within_a_second_of_execute_at(cluster: Cluster) -> None:
    register(cluster.url, job_doc("noop", "noop"))
    cluster.scheduler()
    cluster.worker("w1", concurrency=50, lease=10)
    cluster.worker("w2", concurrency=50, lease=10)
    cluster.wait_listening(3)

    execute_at = datetime.now(UTC) + timedelta(seconds=3)
    ids = submit(cluster.url, "noop", 200, execute_at=execute_at)
    assert cluster.db.status_counts() == {"SCHEDULED": 200}
    cluster.eventually(
        lambda: cluster.db.status_counts() == {"SUCCEEDED": 200}, 20, "200 executions to succeed"
    )

    rows = cluster.db.rows(
        "SELECT a.execution_id, a.worker_id,"
        " extract(epoch FROM a.started_at - e.execute_at)::float8 AS lateness"
        " FROM attempts a JOIN executions e USING (execution_id)"
    )
    assert sorted(r["execution_id"] for r in rows) == sorted(ids), "one attempt each"
    lateness = [float(r["lateness"]) for r in rows]
    due = execute_at.timestamp()
    handler = [r.real - due for r in cluster.journal.records() if r.event == "start"]
    seconds = {
        "p50": percentile(lateness, 50),
        "p99": percentile(lateness, 99),
        "max": max(lateness),
        "min": min(lateness),
        "handler_start_p50": percentile(handler, 50),
        "handler_start_max": max(handler),
    }
    per_worker = Counter(str(r["worker_id"]) for r in rows)
    report = {"count": len(lateness), "seconds": seconds, "per_worker": per_worker}
    (cluster.directory / "precision.json").write_text(json.dumps(report, indent=2))
    ms = {k: f"{v * 1000:.0f} ms" for k, v in seconds.items()}
    print(
        "\nprecision (attempt started_at - executeAt, 200 executions, 2 workers x 50): "
        f"p50 {ms['p50']}, p99 {ms['p99']}, max {ms['max']}, min {ms['min']}; "
        f"handler start p50 {ms['handler_start_p50']}, max {ms['handler_start_max']}; "
        f"per worker {dict(per_worker)}; written to {cluster.directory / 'precision.json'}"
    )
    assert seconds["min"] >= 0, "an attempt started before its executeAt"
    assert seconds["max"] < 1.5, report
