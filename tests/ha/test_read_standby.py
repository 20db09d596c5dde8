"""``TICKWHEEL_READ_DATABASE_URL``: the dashboard's heavy reads on a standby. The setting takes
PostgreSQL only; a multi-host read URL prefers a standby; on the rig, the read stores sit on
the standby and see a write of the primary once it is replicated."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from pydantic import ValidationError

from tests.ha.conftest import DATABASE, start_api
from tests.processes.conftest import TENANT, Cluster, Db, register, slow_doc, submit
from tickwheel.config import Settings
from tickwheel.store.factory import open_read_stores
from tickwheel.store.postgres.pool import primary_conninfo


def test_the_read_database_must_be_postgresql() -> None:
    with pytest.raises(ValidationError, match="the read database must be PostgreSQL"):
        Settings(read_database_url="sqlite:///tickwheel.db")
    assert Settings(read_database_url="postgresql://tw@h1,h2/app").read_database_url


def test_a_multi_host_read_url_prefers_a_standby() -> None:
    got = conninfo_to_dict(primary_conninfo("postgresql://tw@h1,h2/app", reads=True))
    assert got["target_session_attrs"] == "prefer-standby"


async def test_open_read_stores_refuses_sqlite() -> None:
    with pytest.raises(ValueError, match="must be PostgreSQL"):
        await open_read_stores("sqlite:///tickwheel.db")


@pytest.mark.ha
@pytest.mark.timeout(180)
async def test_the_dashboards_reads_come_from_the_standby(rig: Any) -> None:
    reads = await open_read_stores(
        rig.url(DATABASE, target_session_attrs="", application_name="tw-reads")
    )
    try:
        standby = rig.sync_standby()
        with psycopg.connect(rig.node_url(standby, DATABASE), autocommit=True) as conn:
            row = conn.execute(
                "SELECT pg_is_in_recovery(), count(*) FROM pg_stat_activity"
                " WHERE application_name = 'tw-reads'"
            ).fetchone()
        assert row == (True, 1), "the read pool is not on the standby"

        before = await _scheduled(reads)
        url, later = rig.url(DATABASE), datetime.now(UTC) + timedelta(days=1)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, register, url, slow_doc())  # they run their own loop
        await loop.run_in_executor(
            None, lambda: submit(url, "slow", 3, inputs={"seconds": 0}, execute_at=later)
        )
        deadline = time.monotonic() + 30
        while await _scheduled(reads) < before + 3:  # replicated: synchronously, then replayed
            assert time.monotonic() < deadline, "the standby never showed the new executions"
            await asyncio.sleep(0.05)
    finally:
        await reads.close()


async def _scheduled(reads: Any) -> int:
    counts = await reads.stats.stats_status_counts(TENANT)
    return sum(c.count for c in counts if c.status == "SCHEDULED")


@pytest.mark.ha
@pytest.mark.timeout(180)
def test_the_server_opens_its_read_pool_on_the_standby(rig: Any, tmp_path: Path) -> None:
    """``tickwheel server`` with ``TICKWHEEL_READ_DATABASE_URL``: its read pool is a session on
    the standby, its main pool on the primary."""
    url = rig.url(DATABASE)
    cluster = Cluster(url, tmp_path, Db(url))
    read_url = rig.url(DATABASE, target_session_attrs="", application_name="tw-dashboard-reads")
    cluster.env["TICKWHEEL_READ_DATABASE_URL"] = read_url
    try:
        start_api(cluster)
        with psycopg.connect(rig.node_url(rig.sync_standby(), DATABASE)) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE application_name = 'tw-dashboard-reads'"
            ).fetchone()
        assert row == (1,), cluster.output()
    finally:
        cluster.close()
        cluster.db.close()
