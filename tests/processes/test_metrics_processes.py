"""A worker process without the API serves its own ``/metrics`` (``TICKWHEEL_METRICS_PORT``),
and that page carries the cluster's queue gauges from the database, not only the process's
counters: an operator scraping only workers and schedulers still sees the backlog."""

from __future__ import annotations

import re
import socket
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest

from tests.processes.conftest import Cluster, job_doc, register, submit

pytestmark = pytest.mark.postgres


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            return str(r.read().decode())
    except OSError:
        return None


def _value(text: str, series: str) -> float | None:
    match = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    return float(match[1]) if match else None


def test_a_worker_publishes_queue_depth_and_its_own_counters(cluster: Cluster) -> None:
    register(cluster.url, job_doc("noop", "noop"))
    later = datetime.now(UTC) + timedelta(hours=1)
    submit(cluster.url, "noop", 3, execute_at=later)
    port = _free_port()
    cluster.env["TICKWHEEL_METRICS_PORT"] = str(port)
    cluster.env["TICKWHEEL_METRICS_GAUGES_SECONDS"] = "1"  # not the 5 s default: a faster test
    cluster.worker("w1")
    cluster.env.pop("TICKWHEEL_METRICS_PORT")
    cluster.env.pop("TICKWHEEL_METRICS_GAUGES_SECONDS")
    cluster.scheduler()  # no metrics port: it promotes the executions submitted below

    def scheduled_three() -> str | None:
        text = _scrape(port)
        ok = text and _value(text, 'tickwheel_queue_depth{status="SCHEDULED"}') == 3
        return text if ok else None

    text = cluster.eventually(scheduled_three, 30, "the worker's /metrics to show 3 SCHEDULED")
    assert _value(text, "tickwheel_workers_alive") == 1

    submit(cluster.url, "noop", 4)  # due now: promoted, claimed and run by the worker

    def ran_four() -> str | None:
        text = _scrape(port)
        if not text:
            return None
        claimed = _value(text, 'tickwheel_executions_claimed_total{definition="noop"}')
        finished = _value(text, 'tickwheel_executions_finished_recently{status="SUCCEEDED"}')
        return text if claimed == 4 and finished == 4 else None

    text = cluster.eventually(ran_four, 30, "the worker's /metrics to show 4 claimed and done")
    assert _value(text, 'tickwheel_queue_depth{status="SCHEDULED"}') == 3
    assert _value(text, 'tickwheel_queue_depth{status="READY"}') == 0
