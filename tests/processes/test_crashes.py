"""Workers that die, freeze, hang, crash and are told to stop, for real: each test runs
``tickwheel scheduler`` and ``tickwheel worker`` processes on a fresh PostgreSQL database and
sends them real signals. The promise under test: no acknowledged execution is lost, and a stale
fencing token never commits."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.processes.conftest import Cluster, Proc, job_doc, register, slow_doc, submit

pytestmark = pytest.mark.postgres


def summary(attempts: list[Any]) -> list[tuple[str, str]]:
    return [(str(a["worker_id"]), str(a["status"])) for a in attempts]


def test_sigkill_mid_attempt_a_second_worker_completes_after_the_lease(cluster: Cluster) -> None:
    definitions = cluster.directory / "definitions"
    definitions.mkdir()
    (definitions / "slow.json").write_text(json.dumps(slow_doc()))
    cluster.scheduler()
    w1 = cluster.worker("w1", lease=2, definitions=definitions)
    cluster.eventually(
        lambda: cluster.db.rows("SELECT 1 FROM definitions WHERE name = 'slow'"),
        30,
        "w1 to register the definitions of --definitions",
    )
    [eid] = submit(cluster.url, "slow", inputs={"seconds": 5})
    first = cluster.wait_started(eid, w1)

    w1.send(signal.SIGKILL)
    assert w1.popen.wait(timeout=5) == -signal.SIGKILL
    killed_at = time.monotonic()
    w2 = cluster.worker("w2", lease=2, definitions=definitions)

    row = cluster.wait_status(eid, "SUCCEEDED", timeout=30)
    print(f"\nSIGKILL recovery: succeeded {time.monotonic() - killed_at:.1f} s after the kill")
    attempts = cluster.db.attempts(eid)
    assert summary(attempts) == [("w1", "ABANDONED"), ("w2", "SUCCEEDED")]
    assert attempts[0]["error"]["kind"] == "lost"
    assert attempts[0]["fencing_token"] == first.token
    assert attempts[1]["fencing_token"] > attempts[0]["fencing_token"]
    assert row["attempt_count"] == 2 and row["fencing_token"] == attempts[1]["fencing_token"]
    assert row["output"] == {"pid": w2.pid, "token": attempts[1]["fencing_token"]}
    # The journal agrees: w1 started and never ended, w2 ran attempt 2 to its end.
    by_w1 = [(r.event, r.attempt) for r in cluster.journal.of(eid) if r.pid == w1.pid]
    by_w2 = [(r.event, r.attempt) for r in cluster.journal.of(eid) if r.pid == w2.pid]
    assert by_w1 == [("start", 1)]
    assert by_w2 == [("start", 2), ("end", 2)]


def test_a_frozen_worker_past_its_lease_cannot_commit_after_sigcont(cluster: Cluster) -> None:
    register(cluster.url, slow_doc())
    cluster.scheduler()
    w1 = cluster.worker("w1", lease=2)
    [eid] = submit(cluster.url, "slow", inputs={"seconds": 3})
    first = cluster.wait_started(eid, w1)

    w1.send(signal.SIGSTOP)  # frozen with a lease of 2 s and 3 s of work to go
    w2 = cluster.worker("w2", lease=2)
    row = cluster.wait_status(eid, "SUCCEEDED", timeout=30)
    attempts = cluster.db.attempts(eid)
    assert summary(attempts) == [("w1", "ABANDONED"), ("w2", "SUCCEEDED")]
    assert row["output"] == {"pid": w2.pid, "token": attempts[1]["fencing_token"]}
    assert attempts[1]["fencing_token"] > attempts[0]["fencing_token"] == first.token

    # w1 wakes up: its 3 s have passed, so it reports (or heartbeats) with its old token.
    w1.send(signal.SIGCONT)
    dropped = f"dropped (fencing token {first.token})"
    cluster.eventually(lambda: dropped in w1.stderr(), 15, "w1 to drop its stale result")
    ran_to_end = any(r.event == "end" for r in cluster.journal.of(eid) if r.pid == w1.pid)
    print(
        "\nzombie w1: "
        + (
            "its handler finished; the finish was refused by the fencing token"
            if ran_to_end
            else "its heartbeat was refused by the fencing token; the handler was cancelled"
        )
    )
    assert w1.alive(), w1.output()
    after = cluster.db.execution(eid)
    assert after["status"] == "SUCCEEDED"
    assert after["output"] == row["output"] and after["fencing_token"] == row["fencing_token"]
    assert after["updated_at"] == row["updated_at"] and after["finished_at"] == row["finished_at"]
    assert cluster.db.attempts(eid) == attempts  # the ABANDONED attempt stays as the reaper left it


@pytest.mark.parametrize("function", ["hang", "hang_sync"])
def test_a_hanging_handler_is_stopped_at_its_timeout(cluster: Cluster, function: str) -> None:
    register(
        cluster.url,
        job_doc("hang", function, timeout=1, max_attempts=2),
        job_doc("noop", "noop"),
    )
    cluster.scheduler()
    w1 = cluster.worker("w1", concurrency=2, lease=2)
    [eid] = submit(cluster.url, "hang")

    row = cluster.wait_status(eid, "FAILED", timeout=30)
    assert row["error"]["kind"] == "timeout" and row["attempt_count"] == 2
    attempts = cluster.db.attempts(eid)
    assert summary(attempts) == [("w1", "TIMED_OUT"), ("w1", "TIMED_OUT")]
    for attempt in attempts:
        assert attempt["error"]["kind"] == "timeout"
        took = (attempt["finished_at"] - attempt["started_at"]).total_seconds()
        assert 0.9 <= took < 5, f"attempt {attempt['attempt_number']} took {took:.2f} s"
    starts = [r for r in cluster.journal.of(eid, "start") if r.pid == w1.pid]
    assert [r.attempt for r in starts] == [1, 2]
    if function == "hang":  # a coroutine is cancelled; a thread cannot be
        assert [r.attempt for r in cluster.journal.of(eid, "cancelled")] == [1, 2]

    assert w1.alive(), w1.output()
    [after] = submit(cluster.url, "noop")
    cluster.wait_status(after, "SUCCEEDED", timeout=15)
    assert summary(cluster.db.attempts(after)) == [("w1", "SUCCEEDED")]
    assert w1.alive(), w1.output()


class Supervisor:
    """Keeps ``slots`` worker processes running: a dead one is replaced (at most
    ``max_restarts`` times in all) by a new process with the next worker id of its slot."""

    def __init__(self, cluster: Cluster, slots: list[str], max_restarts: int, **options: Any):
        self.cluster = cluster
        self.options = options
        self.max_restarts = max_restarts
        self.restarts = 0
        self.deaths: list[tuple[str, int | None]] = []
        self.current: dict[str, Proc] = {s: cluster.worker(f"{s}-0", **options) for s in slots}
        self.generation = dict.fromkeys(slots, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tend, name="supervisor", daemon=True)

    def _tend(self) -> None:
        while not self._stop.wait(0.1):
            for slot, proc in list(self.current.items()):
                if proc.alive() or self.restarts >= self.max_restarts:
                    continue
                self.deaths.append((proc.name, proc.popen.returncode))
                self.restarts += 1
                self.generation[slot] += 1
                name = f"{slot}-{self.generation[slot]}"
                self.current[slot] = self.cluster.worker(name, **self.options)

    @contextmanager
    def running(self) -> Iterator[Supervisor]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(timeout=5)


def test_a_poison_handler_dead_letters_while_other_work_succeeds(cluster: Cluster) -> None:
    poison = job_doc("crash", "crash", max_attempts=3)
    # The worker deaths it causes are lost attempts, counted against a cap of their own.
    poison["retry"]["maxLostAttempts"] = 3
    register(
        cluster.url,
        poison,
        # Attempts of ordinary work die with the worker the poison kills: give them room.
        job_doc("noop", "noop", max_attempts=10),
    )
    cluster.scheduler()
    supervisor = Supervisor(cluster, ["w1", "w2"], max_restarts=6, concurrency=4, lease=2)
    with supervisor.running():
        [poison] = submit(cluster.url, "crash")
        ordinary = submit(cluster.url, "noop", 50)
        row = cluster.wait_status(poison, "FAILED", timeout=60)
        cluster.eventually(
            lambda: cluster.db.status_counts().get("SUCCEEDED") == 50,
            30,
            "the 50 ordinary executions to succeed",
        )
        # The last worker the poison killed has been replaced before its lease expired.
        cluster.eventually(lambda: supervisor.restarts == 3, 10, "the third restart")
    print(f"\npoison: worker deaths {supervisor.deaths}")
    assert row["attempt_count"] == 3 and row["error"]["kind"] == "lost"
    attempts = cluster.db.attempts(poison)
    assert [a["status"] for a in attempts] == ["ABANDONED"] * 3
    assert all(a["error"]["kind"] == "lost" for a in attempts)
    # Each attempt killed the process that ran it, so each ran in a different process.
    assert len({a["worker_id"] for a in attempts}) == 3
    starts = cluster.journal.of(poison, "start")
    assert [r.attempt for r in starts] == [1, 2, 3] and len({r.pid for r in starts}) == 3
    assert supervisor.restarts == 3
    assert all(code == -signal.SIGKILL for _, code in supervisor.deaths)

    counts = cluster.db.status_counts()
    assert counts == {"SUCCEEDED": 50, "FAILED": 1}, counts
    for eid in ordinary:
        statuses = [a["status"] for a in cluster.db.attempts(eid)]
        assert statuses.count("SUCCEEDED") == 1 and statuses[-1] == "SUCCEEDED", statuses
        assert set(statuses[:-1]) <= {"ABANDONED"}, statuses


def test_sigterm_releases_the_running_attempt_without_burning_the_budget(
    cluster: Cluster,
) -> None:
    register(cluster.url, slow_doc(max_attempts=3))
    w1 = cluster.worker("w1", lease=2, grace=1)
    [eid] = submit(cluster.url, "slow", inputs={"seconds": 30})
    first = cluster.wait_started(eid, w1)

    sent = time.monotonic()
    w1.send(signal.SIGTERM)
    code = w1.popen.wait(timeout=10)
    took = time.monotonic() - sent
    print(f"\nSIGTERM with --grace 1: exited {code} after {took:.2f} s")
    assert code == 0, w1.output()
    assert took < 5, f"the worker took {took:.1f} s to stop with --grace 1"
    [cancelled] = [r for r in cluster.journal.of(eid, "cancelled") if r.pid == w1.pid]
    assert cancelled.mono - sent >= 0.9, "the handler was cancelled before the grace ran out"

    row = cluster.db.execution(eid)
    assert row["status"] == "READY" and row["lease_owner"] is None
    assert row["attempt_count"] == 1 and row["max_attempts"] == 3 + 1
    [attempt] = cluster.db.attempts(eid)
    assert (attempt["worker_id"], attempt["status"]) == ("w1", "ABANDONED")
    assert attempt["error"]["kind"] == "released"

    w2 = cluster.worker("w2", lease=2)
    second = cluster.wait_started(eid, w2)
    assert second.attempt == 2 and second.token > first.token
    assert summary(cluster.db.attempts(eid)) == [("w1", "ABANDONED"), ("w2", "RUNNING")]
    assert cluster.db.status(eid) == "RUNNING"


# -- bugs found here (src/tickwheel/engine/runners/python.py, server.run_roles) -------------------


def test_sigterm_stops_a_worker_whose_sync_handler_runs_on(cluster: Cluster) -> None:
    register(cluster.url, slow_doc(function="slow_sync"))
    w1 = cluster.worker("w1", lease=2, grace=1)
    [eid] = submit(cluster.url, "slow", inputs={"seconds": 30})
    cluster.wait_started(eid, w1)
    w1.send(signal.SIGTERM)
    # The release itself works: the execution is READY again after the grace.
    cluster.wait_status(eid, "READY", timeout=10)
    cluster.eventually(lambda: not w1.alive(), 5, "w1 to exit after SIGTERM with --grace 1")


def test_hung_sync_handlers_do_not_starve_later_sync_jobs(cluster: Cluster) -> None:
    pool = min(32, (os.cpu_count() or 1) + 4)  # ThreadPoolExecutor's default size
    register(
        cluster.url,
        job_doc("hang", "hang_sync", timeout=1, max_attempts=1),
        job_doc("noop", "noop_sync", timeout=2, max_attempts=1),
    )
    w1 = cluster.worker("w1", concurrency=8, lease=2)
    hangs = submit(cluster.url, "hang", pool)
    cluster.eventually(
        lambda: cluster.db.status_counts() == {"FAILED": pool}, 30, f"{pool} hung attempts"
    )
    [eid] = submit(cluster.url, "noop")
    row = cluster.wait_status(eid, {"SUCCEEDED", "FAILED"}, timeout=15)
    assert len(hangs) == pool and w1.alive()
    assert row["status"] == "SUCCEEDED", (row["error"], cluster.journal.of(eid))
