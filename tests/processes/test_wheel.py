"""The timing wheel in a real ``tickwheel scheduler`` process on PostgreSQL: executions submitted
by another process for a few seconds ahead, inside the loaded window, reach the scheduler as due
hints (LISTEN/NOTIFY) and are promoted at their instant. The scheduler runs with a 60 s lease
and window, so that its catch-all (every lease renewal, 20 s) cannot be what promotes them: only
the hints can make every one of them READY within a fraction of a second."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.processes.conftest import Cluster, job_doc, register, submit

pytestmark = pytest.mark.postgres


def test_executions_inserted_inside_the_window_are_promoted_at_their_instant(
    cluster: Cluster,
) -> None:
    register(cluster.url, job_doc("noop", "noop"))
    cluster._start("scheduler", ["scheduler", "--shard-lease", "60", "--window", "60"])
    cluster.wait_listening(1)  # up, its window loaded, waiting for signals
    base = datetime.now(UTC) + timedelta(seconds=2)
    ids = []
    for step in range(8):  # spread over 4 s: a catch-all would leave most of them seconds late
        ids += submit(cluster.url, "noop", 25, execute_at=base + timedelta(seconds=step / 2))

    def promoted() -> bool:
        return cluster.db.status_counts() == {"READY": len(ids)}

    cluster.eventually(promoted, 20, f"{len(ids)} executions READY")
    [row] = cluster.db.rows(
        "SELECT min(extract(epoch FROM ready_at - execute_at))::float8 AS early,"
        " max(extract(epoch FROM ready_at - execute_at))::float8 AS late FROM executions"
    )
    print(
        f"\nwheel: {len(ids)} hinted executions READY {row['early']:.3f}..{row['late']:.3f} s late"
    )
    assert row["early"] >= 0, "promoted before its executeAt"
    assert row["late"] < 1.0, row
