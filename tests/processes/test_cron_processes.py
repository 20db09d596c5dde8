"""Real processes on a real PostgreSQL: three ``tickwheel cron run`` instances share many
every-second cron jobs, one is SIGKILLed half way, and every occurrence of the window is
materialised exactly once (counted per job), none missing.

The issue's numbers, 500 jobs for 30 s, which the 2-core CI machine keeps up with (about 36 s
in all); TW_CRON_PROC_JOBS / TW_CRON_PROC_SECONDS change them."""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from tests.acceptance.conftest import EXAMPLES, free_port
from tests.processes.conftest import Cluster, Proc

JOBS = int(os.environ.get("TW_CRON_PROC_JOBS", "500"))
SECONDS = int(os.environ.get("TW_CRON_PROC_SECONDS", "30"))
CLAIM = 4.0  # seconds: how long a killed instance's claims block its jobs
LEAD = 2.0

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]


def start_api(cluster: Cluster) -> tuple[Proc, str, str]:
    port = free_port()
    api = cluster._start(
        "api", ["server", "--no-engine", "--port", str(port), "--definitions", str(EXAMPLES)]
    )
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    cluster.eventually(healthy, 30, "the API to answer /healthz")
    key = (cluster.directory / "tickwheel.admin-key").read_text().strip()
    return api, url, key


def start_cron(cluster: Cluster, url: str, key: str, n: int) -> Proc:
    return cluster._start(
        f"cron{n}",
        ["--url", url, "--api-key", key, "cron", "run", "--tenant", "default",
         "--lead", str(LEAD), "--claim", str(CLAIM)],
    )  # fmt: skip


def test_three_instances_one_killed_each_occurrence_exactly_once(cluster: Cluster) -> None:
    _, url, key = start_api(cluster)
    headers = {"Authorization": f"Bearer {key}"}
    docs = [
        {"name": f"tick-{i:03}", "definitionUri": "hello", "expression": "* * * * * *",
         "inputs": {"name": f"n{i}"}, "misfirePolicy": "catch_up", "maxCatchUp": 100}
        for i in range(JOBS)
    ]  # fmt: skip
    r = httpx.post(
        f"{url}/v1/cron-jobs/apply", json={"cronJobs": docs}, headers=headers, timeout=60
    )
    assert r.status_code == 200, r.text
    assert r.json()["summary"]["create"] == JOBS
    crons = [start_cron(cluster, url, key, n) for n in range(3)]
    started = datetime.now(UTC)
    time.sleep(SECONDS / 2)  # real time is the point of this test
    crons[0].send(signal.SIGKILL)
    crons[0].popen.wait(timeout=10)
    time.sleep(SECONDS / 2)
    stopped = datetime.now(UTC)
    for proc in crons[1:]:
        assert proc.alive(), proc.output()
        proc.send(signal.SIGTERM)
    for proc in crons[1:]:
        assert proc.popen.wait(timeout=15) == 0, proc.output()

    # The window: from a little after the start (all three claiming) to a little before the
    # stop. Every second of it, every job, exactly one execution.
    first = (started + timedelta(seconds=3)).replace(microsecond=0)
    last = (stopped - timedelta(seconds=1)).replace(microsecond=0)
    seconds = int((last - first).total_seconds()) + 1
    rows = cluster.db.rows(
        "SELECT j.name, count(*) AS n, count(DISTINCT e.idempotency_key) AS keys"
        " FROM executions e JOIN cron_jobs j"
        "   ON e.idempotency_key LIKE 'cron:' || j.cron_job_id || ':%%'"
        " WHERE e.execute_at BETWEEN %s AND %s GROUP BY j.name",
        (first, last),
    )
    counts = {r["name"]: (r["n"], r["keys"]) for r in rows}
    assert len(counts) == JOBS, f"jobs with executions: {len(counts)}\n{cluster.output()}"
    wrong = {name: c for name, c in counts.items() if c != (seconds, seconds)}
    assert wrong == {}, f"expected {seconds} per job in [{first}, {last}]\n{cluster.output()}"
    # The history agrees: one SUBMITTED row per occurrence, naming that execution.
    [history] = cluster.db.rows(
        "SELECT count(*) AS n, count(DISTINCT (o.cron_job_id, o.occurrence)) AS distinct_n,"
        "       count(*) FILTER (WHERE e.execution_id IS NULL) AS dangling"
        " FROM cron_occurrences o LEFT JOIN executions e ON e.execution_id = o.execution_id"
        " WHERE o.outcome = 'SUBMITTED' AND o.occurrence BETWEEN %s AND %s",
        (first, last),
    )
    assert history["n"] == history["distinct_n"] == JOBS * seconds
    assert history["dangling"] == 0
    other = cluster.db.rows(
        "SELECT outcome, count(*) AS n FROM cron_occurrences"
        " WHERE outcome <> 'SUBMITTED' AND occurrence BETWEEN %s AND %s GROUP BY outcome",
        (first, last),
    )
    assert other == [], other
    Path(cluster.directory / "result.txt").write_text(
        f"{JOBS} jobs x {seconds} s = {JOBS * seconds} occurrences, each once\n"
    )
