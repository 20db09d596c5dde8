"""Cancel of RUNNING executions with real ``tickwheel worker`` processes on PostgreSQL: a python
handler is cancelled at its await, a command gets SIGTERM and, when it ignores it, SIGKILL after
the worker's ``--cancel-grace``. Both end CANCELLED, their attempt CANCELLED, the request in
the history; the worker goes on claiming."""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.engine.helpers import is_running
from tests.processes.conftest import Cluster, Proc, job_doc, register, run, submit

pytestmark = pytest.mark.postgres

LEASE = 9.0  # a heartbeat every 3 s; the cancel request wakes it at once (NOTIFY)


def cancel(cluster: Cluster, execution_id: uuid.UUID) -> dict[str, object]:
    answer: dict[str, object] = run(lambda t: t.cancel(execution_id), cluster.url)
    return answer


def ended_cancelled(cluster: Cluster, execution_id: uuid.UUID) -> None:
    row = cluster.wait_status(execution_id, "CANCELLED", timeout=20)
    assert row["error"]["kind"] == "cancelled" and row["cancel_requested_at"] is not None
    [attempt] = cluster.db.attempts(execution_id)
    assert attempt["status"] == "CANCELLED"
    events = cluster.db.rows(
        "SELECT kind FROM execution_events WHERE execution_id = %s", (execution_id,)
    )
    assert [e["kind"] for e in events] == ["cancel_requested"]


def test_a_running_python_handler_is_cancelled_by_its_worker(cluster: Cluster) -> None:
    register(cluster.url, job_doc("hang", "hang"), job_doc("noop", "noop"))
    cluster.scheduler()
    w1 = cluster.worker("w1", lease=LEASE)
    [eid] = submit(cluster.url, "hang")
    cluster.wait_started(eid, w1)
    started = cluster.db.execution(eid)["lease_expires_at"]
    # Its heartbeat runs (the first comes a third of a lease after the claim): from now on a
    # cancel request wakes it at once, rather than at its next beat.
    cluster.eventually(
        lambda: cluster.db.execution(eid)["lease_expires_at"] > started, 10, "a heartbeat"
    )
    answer = cancel(cluster, eid)
    assert answer["status"] == "RUNNING" and answer["cancelRequestedAt"]
    asked = time.monotonic()
    ended_cancelled(cluster, eid)
    took = time.monotonic() - asked
    print(f"\ncancel of a running python handler: CANCELLED {took:.2f} s later")
    assert took < LEASE / 3, "heard by the NOTIFY wake-up, before the next heartbeat was due"
    assert [r.event for r in cluster.journal.of(eid)] == ["start", "cancelled"]
    # The worker is free and goes on working.
    [after] = submit(cluster.url, "noop")
    cluster.wait_status(after, "SUCCEEDED", timeout=20)


IGNORES_TERM = """
import os, pathlib, signal, sys, time
marker = pathlib.Path(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *_: marker.write_text(f"TERM {os.getpid()}"))
marker.write_text(f"started {os.getpid()}")
while True:
    time.sleep(0.01)
"""


def command_worker(cluster: Cluster, grace: float) -> Proc:
    args = ["worker", "--worker-id", "w1", "--lease", str(LEASE), "--path", str(cluster.jobs_dir)]
    args += ["--command", sys.executable, "--cancel-grace", str(grace)]
    return cluster._start("w1", args)


def test_a_running_command_gets_sigterm_then_sigkill_after_the_grace(
    cluster: Cluster, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    doc = {
        "name": "stubborn",
        "version": 1,
        "execution": {"type": "command", "argv": [sys.executable, "-c", IGNORES_TERM, str(marker)]},
        "timeout": 120,
    }
    register(cluster.url, doc)
    cluster.scheduler()
    grace = 1.0
    command_worker(cluster, grace)
    [eid] = submit(cluster.url, "stubborn")
    cluster.eventually(lambda: marker.exists() and "started" in marker.read_text(), 30, "start")
    pid = int(marker.read_text().split()[1])
    cancel(cluster, eid)
    cluster.eventually(lambda: marker.read_text().startswith("TERM"), 10, "SIGTERM")
    termed = time.monotonic()
    assert is_running(pid)  # it ignored SIGTERM and is still there, within the grace
    cluster.eventually(lambda: not is_running(pid), 10, "SIGKILL after the grace")
    killed = time.monotonic() - termed
    print(f"\nSIGTERM ignored: SIGKILL {killed:.2f} s later (grace {grace} s)")
    assert killed >= grace * 0.8
    ended_cancelled(cluster, eid)
    assert json.loads(json.dumps(cluster.db.execution(eid)["error"]))["kind"] == "cancelled"
