"""The circuit breaker with real processes on PostgreSQL: a scheduler and two ``tickwheel
worker`` processes, a handler that fails on demand. Two failed attempts open the breaker (in
whichever worker counted the second), the next executions wait READY, after the cool-down the
scheduler lets exactly one probe through, its success closes the breaker and the rest run."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.processes.conftest import Cluster, job_doc, register, submit

pytestmark = pytest.mark.postgres

COOL_DOWN = 3.0


def breaker_state(cluster: Cluster) -> str | None:
    rows = cluster.db.rows("SELECT state FROM circuit_breakers")
    return str(rows[0]["state"]) if rows else None


def test_the_breaker_opens_lets_one_probe_through_and_closes(cluster: Cluster) -> None:
    doc = job_doc("pay", "flaky", inputs={"fail": "boolean"}, outputs={"ok": "boolean"})
    doc["retry"] = {"maxAttempts": 1}
    doc["circuitBreaker"] = {"consecutiveFailures": 2, "coolDown": COOL_DOWN}
    register(cluster.url, doc)
    cluster.scheduler()
    cluster.worker("w1")
    cluster.worker("w2")
    failed = submit(cluster.url, "pay", 2, inputs={"fail": True})
    for eid in failed:
        cluster.wait_status(eid, "FAILED", timeout=20)
    cluster.eventually(lambda: breaker_state(cluster) == "open" or None, 10, "the breaker opens")
    opened_at = time.monotonic()

    waiting = submit(cluster.url, "pay", 5, inputs={"fail": False})
    time.sleep(1.0)  # workers are woken by the insert: they would have claimed by now
    assert {cluster.db.status(e) for e in waiting} == {"READY"}

    for eid in waiting:
        cluster.wait_status(eid, "SUCCEEDED", timeout=30)
    assert time.monotonic() - opened_at >= COOL_DOWN - 0.5
    assert breaker_state(cluster) == "closed"
    transitions = cluster.db.rows(
        "SELECT from_state, to_state, reason FROM circuit_breaker_transitions"
        " ORDER BY transition_id"
    )
    assert [(t["from_state"], t["to_state"]) for t in transitions] == [
        ("closed", "open"),
        ("open", "half_open"),
        ("half_open", "closed"),
    ]
    # Exactly one probe: the first of the waiting executions started alone, before the rest.
    starts = sorted(
        (r for e in waiting for r in cluster.journal.of(e, "start")), key=lambda r: r.mono
    )
    probe = cluster.db.rows("SELECT probe_execution_id FROM circuit_breakers")[0]
    assert probe["probe_execution_id"] is None
    first = starts[0]
    assert f"execution {first.execution_id} is the probe" in transitions[1]["reason"]
    finished = cluster.db.execution(uuid.UUID(first.execution_id))["finished_at"]
    later = [cluster.db.execution(uuid.UUID(r.execution_id))["started_at"] for r in starts[1:]]
    assert all(started > finished for started in later)
    assert cluster.db.rows("SELECT count(*) AS n FROM pauses")[0]["n"] == 0
