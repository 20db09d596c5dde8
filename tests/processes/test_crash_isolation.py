"""A handler that kills its process must cost only itself (issue 12, part 5), for real: worker
processes with a poison handler (``os._exit``) beside healthy slow executions with
``maxAttempts: 1``. Without isolation the poison takes its worker down, and the neighbours' lost
attempts are counted apart from their budget; with ``isolation: process`` only the poison's
child dies."""

from __future__ import annotations

from typing import Any

import pytest

from tests.processes.conftest import JOBS_MODULE, Cluster, register, slow_doc, submit
from tests.processes.test_crashes import Supervisor

pytestmark = pytest.mark.postgres

HEALTHY = 3


def poison_doc(**retry: Any) -> dict[str, Any]:
    return {
        "name": "poison",
        "version": 1,
        "execution": {"type": "python", "entrypoint": f"{JOBS_MODULE}:exit_now"},
        "timeout": 30,
        "retry": {"baseDelay": 0.1, "maxDelay": 0.2, **retry},
    }


def _started_all(cluster: Cluster, ids: list[Any]) -> bool:
    return all(cluster.journal.of(eid, "start") for eid in ids)


def test_a_poison_neighbour_never_dead_letters_healthy_executions(cluster: Cluster) -> None:
    register(cluster.url, slow_doc(max_attempts=1), poison_doc(maxAttempts=1, maxLostAttempts=2))
    cluster.scheduler()
    supervisor = Supervisor(cluster, ["w1"], max_restarts=3, concurrency=4, lease=2)
    with supervisor.running():
        healthy = submit(cluster.url, "slow", HEALTHY, inputs={"seconds": 3})
        cluster.eventually(lambda: _started_all(cluster, healthy), 30, "the healthy ones to start")
        [poison] = submit(cluster.url, "poison")  # the fourth slot of the same worker
        row = cluster.wait_status(poison, "FAILED", timeout=60)
        cluster.eventually(
            lambda: cluster.db.status_counts().get("SUCCEEDED") == HEALTHY,
            60,
            f"the {HEALTHY} healthy executions to succeed",
        )
    print(f"\npoison beside healthy work: worker deaths {supervisor.deaths}")
    assert cluster.db.status_counts() == {"SUCCEEDED": HEALTHY, "FAILED": 1}
    # The poison ends after its cap of lost attempts, and says so.
    assert row["error"]["kind"] == "lost" and row["attempt_count"] == 2
    assert "retry.maxLostAttempts (2)" in row["error"]["message"]
    assert [a["status"] for a in cluster.db.attempts(poison)] == ["ABANDONED"] * 2
    assert [code for _, code in supervisor.deaths] == [3, 3]  # its os._exit, twice
    # Each healthy execution lost attempts with the worker the poison killed, and still ran to
    # success on its one attempt of its own budget.
    for eid in healthy:
        statuses = [a["status"] for a in cluster.db.attempts(eid)]
        assert statuses[-1] == "SUCCEEDED" and set(statuses[:-1]) == {"ABANDONED"}, statuses
        assert all(a["error"]["kind"] == "lost" for a in cluster.db.attempts(eid)[:-1])


def test_an_isolated_handler_exiting_fails_only_its_own_attempt(cluster: Cluster) -> None:
    poison = poison_doc(maxAttempts=2)
    poison["execution"]["isolation"] = "process"
    register(cluster.url, slow_doc(max_attempts=1), poison)
    cluster.scheduler()
    w1 = cluster.worker("w1", concurrency=4, lease=2)
    healthy = submit(cluster.url, "slow", HEALTHY, inputs={"seconds": 2})
    cluster.eventually(lambda: _started_all(cluster, healthy), 30, "the healthy ones to start")
    [eid] = submit(cluster.url, "poison")

    row = cluster.wait_status(eid, "FAILED", timeout=30)
    for other in healthy:
        cluster.wait_status(other, "SUCCEEDED", timeout=30)
    assert w1.alive(), w1.output()
    # The poison failed as an ordinary, retryable error, once per attempt of its own budget.
    assert row["attempt_count"] == 2 and row["error"]["kind"] == "error"
    assert "exited with code 3" in row["error"]["message"]
    attempts = cluster.db.attempts(eid)
    assert [(a["worker_id"], a["status"]) for a in attempts] == [("w1", "FAILED")] * 2
    # Each attempt ran in a child of its own, never in the worker.
    pids = {r.pid for r in cluster.journal.of(eid, "start")}
    assert len(pids) == 2 and w1.pid not in pids
    # The neighbours finished on their first attempt, in the worker itself.
    for other in healthy:
        [attempt] = cluster.db.attempts(other)
        assert (attempt["worker_id"], attempt["status"]) == ("w1", "SUCCEEDED")
        assert cluster.db.execution(other)["output"]["pid"] == w1.pid
    assert cluster.db.status_counts() == {"SUCCEEDED": HEALTHY, "FAILED": 1}
