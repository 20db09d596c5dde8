"""``tickwheel worker --with-scheduler``: one process that is a scheduler (and reaper) and a
worker, as ``run_roles(scheduler=True, worker=True)``. With nothing else running, an execution
submitted for later is promoted by that process's scheduler and run by its worker; SIGTERM stops
both and gives the shards back. Its start loads nothing of the SQLite store."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.processes.conftest import Cluster, register, slow_doc, submit

pytestmark = pytest.mark.postgres


def live_shards(cluster: Cluster) -> dict[str, int]:
    rows = cluster.db.rows(
        "SELECT owner, count(*) AS n FROM shard_leases"
        " WHERE owner IS NOT NULL AND expires_at > now() GROUP BY owner"
    )
    return {str(r["owner"]): int(r["n"]) for r in rows}


def test_one_process_promotes_and_runs_a_future_execution_then_stops_on_sigterm(
    cluster: Cluster,
) -> None:
    register(cluster.url, slow_doc())
    proc = cluster.worker("w1", with_scheduler=True)
    # Its scheduler holds every shard (no other scheduler runs), so it alone can promote.
    cluster.eventually(
        lambda: sum(live_shards(cluster).values()) == 1024, 30, "the process to lease 1024 shards"
    )
    cluster.wait_listening(1)
    at = datetime.now(UTC) + timedelta(seconds=1.5)
    [eid] = submit(cluster.url, "slow", inputs={"seconds": 0}, execute_at=at)
    assert cluster.db.status(eid) == "SCHEDULED"  # due later: it needs a promotion

    row = cluster.wait_status(eid, "SUCCEEDED", timeout=20)
    assert row["ready_at"] >= row["execute_at"], "promoted before its executeAt"
    assert [r.pid for r in cluster.journal.of(eid, "start")] == [proc.pid]  # the same process
    [attempt] = cluster.db.attempts(eid)
    assert attempt["worker_id"] == "w1"

    sent = time.monotonic()
    proc.send(signal.SIGTERM)
    code = proc.popen.wait(timeout=15)
    assert code == 0, proc.output()
    assert time.monotonic() - sent < 10
    assert "Traceback" not in proc.stderr(), proc.output()
    assert live_shards(cluster) == {}, "the shards were not released at the stop"


def loaded_by_a_start(db_url: str, prefixes: tuple[str, ...]) -> list[str]:
    """Which of ``prefixes`` the start of ``worker --with-scheduler`` on ``db_url`` imports:
    the store opened and checked, the engine's services built."""
    code = textwrap.dedent(f"""
        import asyncio, json, sys
        from tickwheel.config import Settings
        from tickwheel.server import Engine, prepare

        async def start() -> None:
            settings = Settings(_env_file=None, database_url={db_url!r})
            prepared = await prepare(settings, serves_api=False, claims=True)
            Engine(prepared.store, settings, scheduler=True, worker=True, leased=True)
            await prepared.store.close()

        asyncio.run(start())
        prefixes = {prefixes!r}
        print(json.dumps(sorted(m for m in sys.modules if m.startswith(prefixes))))
        """)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    found: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_a_scheduler_on_postgresql_loads_nothing_of_sqlite(db_url: str) -> None:
    """The scheduler's pruner and webhook sender find their tables on the store's own database
    (``store.factory``): on PostgreSQL that loaded SQLite's whole store, ~40 ms of the start of
    ``tickwheel worker --with-scheduler`` (and of ``tickwheel scheduler``)."""
    assert loaded_by_a_start(db_url, ("tickwheel.store.sqlite", "aiosqlite")) == []


def test_a_scheduler_on_postgresql_loads_no_cron_domain_and_no_resource_models(
    db_url: str,
) -> None:
    """The cron domain (its parsers, cronsim) and the API's resource models were loaded by the
    webhook sender and the pruner beside the scheduler, for a cron outcome's type and an
    instant's spelling: the pruner now finds the cron tables at its first pass, a minute after
    the start (on SQLite they are part of the store)."""
    cron = ("tickwheel.domain.cron", "tickwheel.store.postgres.cron", "cronsim")
    assert loaded_by_a_start(db_url, (*cron, "tickwheel.resources")) == []
