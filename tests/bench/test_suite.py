"""The benchmark suite's own code paths, at a size that takes seconds, on SQLite: a broken
benchmark should fail here rather than an hour into ``make bench``. The figures themselves are
not checked (they depend on the machine); what is checked is that every execution was stored,
ran and was counted."""

from __future__ import annotations

import contextlib
import importlib.util
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from bench.b1_submit import submit_through
from bench.backlog import rows_text, uuid7
from bench.systems import TickwheelSystem
from bench.workloads import Config, drain, idle, submit

from bench import journal
from tickwheel.domain.sharding import shard_id

N = 50


def test_b1_stores_every_execution_through_each_way_in(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        system = TickwheelSystem(stack, tmp_path, tmp_path / "journal", pg_url="", backend="sqlite")
        for mode in ("http_single", "http_batch", "sdk_batch"):
            assert submit_through(system, mode, N, concurrency=2) > 0
        assert system.db.counts() == {"READY": 3 * N}


def test_b2_drain_runs_every_execution_once() -> None:
    figures = drain("tickwheel", 1, N, Config(pg_url="", backend="sqlite", timeout=60))
    assert figures["repeated_starts"] == 0
    assert figures["drain_eps"] > 0
    assert figures["progress"][-1][1] == N


def test_b2_drain_under_concurrency_limits_runs_every_execution_once() -> None:
    cfg = Config(pg_url="", backend="sqlite", timeout=60, limit_keys=7)
    figures = drain("tickwheel-limits", 2, N, cfg)
    assert figures["repeated_starts"] == 0
    assert figures["progress"][-1][1] == N


def test_idle_measures_cpu_of_workers_that_run_nothing() -> None:
    cfg = Config(pg_url="", backend="sqlite", warmup=1.0, idle_settle=0.0, idle_seconds=1.0)
    figures = idle("tickwheel", 1, cfg)
    assert figures["idle_seconds"] >= 1.0
    parts = figures["idle_cpu_ms_per_s_workers"], figures["idle_cpu_ms_per_s_backend"]
    assert all(part >= 0 for part in parts)
    assert figures["idle_cpu_ms_per_s_total"] == sum(parts)
    assert figures["idle_cpu_ms_per_s_backend"] == 0  # SQLite: no server processes


def test_journal_counts_only_complete_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "journal"
    monkeypatch.setenv(journal.JOURNAL_ENV, str(path))
    counter = journal.Counter(path)
    assert counter() == 0
    journal.record("a")
    journal.record("b")
    with path.open("a") as f:
        f.write("c 12")  # a line still being written
    assert counter() == 2
    with path.open("a") as f:
        f.write("34.5\n")
    journal.record("a")
    assert counter() == 4
    starts = journal.read(path)
    assert sorted(starts) == ["a", "b", "c"] and len(starts["a"]) == 2


def test_backlog_rows_are_valid_for_the_schema() -> None:
    import random

    first = datetime(2030, 1, 1, tzinfo=UTC)
    lines = rows_text(100, 1_700_000_000_000, first, random.Random(1)).decode().splitlines()
    assert len(lines) == 100
    for line in lines:
        fields = line.split("\t")
        execution_id = uuid.UUID(fields[0])
        assert execution_id.version == 7
        at, bucket = datetime.fromisoformat(fields[5]), datetime.fromisoformat(fields[6])
        assert at >= first and bucket == at.replace(second=0, microsecond=0)
        assert int(fields[7]) == shard_id(execution_id)
        assert fields[8] == "SCHEDULED"
    assert uuid7(1, 0).int >> 80 == 1


@pytest.mark.skipif(
    importlib.util.find_spec("celery") is None or importlib.util.find_spec("procrastinate") is None,
    reason="the peers (celery, procrastinate) come with the bench extra: pip install -e '.[bench]'",
)
def test_peer_apps_register_the_noop_task() -> None:
    from bench import jobs_celery, jobs_procrastinate

    assert "noop" in jobs_celery.app.tasks
    assert "noop" in jobs_procrastinate.app.tasks


@pytest.mark.postgres
@pytest.mark.skipif(
    importlib.util.find_spec("pgqueuer") is None,
    reason="PgQueuer comes with the bench extra: pip install -e '.[bench]'",
)
def test_pgqueuer_peer_submits_drains_and_measures_cpu(pg_url: str) -> None:
    """The whole adapter on a fresh database of the test server: schema, both submit calls, a
    real worker process, the journal and the CPU figures."""
    server = pg_url.rsplit("/", 1)[0] + "/"
    cfg = Config(pg_url=server, timeout=60)
    stored = submit("pgqueuer", N, N, 20, cfg)
    assert stored["submit_single_eps"] > 0 and stored["submit_batch_eps"] > 0
    figures = drain("pgqueuer", 1, N, cfg)
    assert figures["repeated_starts"] == 0
    assert figures["progress"][-1][1] == N
    assert figures["cpu_ms_per_execution_workers"] is None or (
        figures["cpu_ms_per_execution_workers"] >= 0
    )
