"""Reaching the primary: how a multi-host URL is read, a session that turned read-only is
dropped (503, never 500), and, on the HA rig, the pool and the LISTEN connection of one store
follow a switch-over to the other node."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.ha.conftest import FIGURES
from tickwheel.domain.errors import Unavailable
from tickwheel.store.postgres.pool import Pool, primary_conninfo, read_only
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.protocol import Topic


def test_several_hosts_ask_for_the_primary() -> None:
    got = conninfo_to_dict(primary_conninfo("postgresql://tw@10.0.0.1:5433,10.0.0.2:5434/app"))
    assert got == {
        "user": "tw",
        "dbname": "app",
        "host": "10.0.0.1,10.0.0.2",
        "port": "5433,5434",
        "target_session_attrs": "read-write",
    }


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://tw@db.internal:5432/app",  # one host: a proxy or a managed endpoint
        "postgresql://tw@h1,h2/app?target_session_attrs=primary",  # the URL chose
        "postgresql://tw@h1,h2/app?target_session_attrs=any",
    ],
)
def test_one_host_or_a_chosen_attribute_is_kept(url: str) -> None:
    assert conninfo_to_dict(primary_conninfo(url)) == conninfo_to_dict(url)


def test_an_unreadable_url_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unreadable PostgreSQL URL"):
        primary_conninfo("postgresql://tw@h1/app?no_such_option=1")


def test_read_only_errors_are_recognised() -> None:
    assert read_only(psycopg.errors.ReadOnlySqlTransaction("cannot execute INSERT"))
    assert not read_only(psycopg.errors.UniqueViolation("duplicate key"))


@pytest.mark.postgres
async def test_a_session_that_turned_read_only_is_dropped(pg_url: str) -> None:
    """What a write meets on a demoted primary, imitated with a read-only session: 503 for the
    request, and the pool's next connection is a new session."""
    pool = Pool(pg_url, min_size=1, max_size=1, timeout=5)
    await pool.open(wait=True)
    try:
        async with pool.connection() as conn:
            await conn.execute("SET default_transaction_read_only = on")
            first = await (await conn.execute("SELECT pg_backend_pid()")).fetchone() or {}
        with pytest.raises(Unavailable) as caught:
            async with pool.connection() as conn:
                await conn.execute("CREATE TABLE tw_read_only_probe (x int)")
        assert caught.value.retry_after > 0
        async with pool.connection(timeout=10) as conn:
            row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
            mode = await (await conn.execute("SHOW default_transaction_read_only")).fetchone()
        assert row is not None and row != first
        assert mode is not None and mode["default_transaction_read_only"] == "off"
    finally:
        await pool.close()


@pytest.mark.ha
@pytest.mark.timeout(180)
async def test_one_store_follows_a_switchover(
    rig: Any, record_property: Callable[[str, object], None]
) -> None:
    """Writes during a planned switch-over fail only with ``Unavailable``; afterwards they go to
    the new primary, and the store LISTENs there again."""
    store = await PostgresStore.open(rig.url("tickwheel"), max_size=2, timeout=10)
    try:
        assert await store._signals.listen(10)
        before = rig.primary()
        port = await _server_port(store)
        assert port == rig.state["nodes"][before]["pg_port"]
        switch = asyncio.get_running_loop().run_in_executor(None, rig.switchover)
        unavailable, started = 0, time.monotonic()
        while not switch.done() or port != rig.state["nodes"][rig.primary() or before]["pg_port"]:
            try:
                port = await _server_port(store)
            except Unavailable:
                unavailable += 1
            await asyncio.sleep(0.05)
            assert time.monotonic() - started < 90, "the store did not reach the new primary"
        after = await switch
        assert after != before and port == rig.state["nodes"][after]["pg_port"]
        # LISTEN again on the new primary: a NOTIFY sent there reaches this store.
        deadline = time.monotonic() + 30
        while not await store._signals.listen(1):
            assert time.monotonic() < deadline, "the listener did not come back"
        async with store.pool.connection() as conn:
            await conn.execute("SELECT pg_notify('tickwheel_ready', 'elsewhere')")
        assert await store._signals.wait_for(Topic.READY, 10)
        took = time.monotonic() - started
        record_property(
            FIGURES,
            f"HA: one store, planned switch-over: writing on the new primary after {took:.2f} s"
            f" ({unavailable} writes answered Unavailable, none failed otherwise)",
        )
    finally:
        await store.close()


async def _server_port(store: PostgresStore) -> int:
    """The port of the node that took a write."""
    async with store.pool.connection(timeout=2) as conn, conn.transaction():
        await conn.execute("CREATE TEMP TABLE IF NOT EXISTS tw_probe (x int) ON COMMIT DROP")
        row = await (await conn.execute("SELECT inet_server_port() AS port")).fetchone()
    assert row is not None
    return int(row["port"])


@pytest.mark.ha
@pytest.mark.timeout(240)
async def test_one_store_follows_the_loss_of_a_whole_node(
    rig: Any, record_property: Callable[[str, object], None]
) -> None:
    """The primary's Patroni and PostgreSQL killed together, as when its host dies: the standby
    takes over once the leader key expires, and the store's writes follow; the lost node,
    started again, rejoins as the synchronous standby."""
    store = await PostgresStore.open(rig.url("tickwheel"), max_size=2, timeout=10)
    try:
        lost = rig.primary()
        assert await _server_port(store) == rig.state["nodes"][lost]["pg_port"]
        started = time.monotonic()
        await asyncio.get_running_loop().run_in_executor(None, rig.kill_node, lost)
        # Sessions already open may outlive their killed postmaster for a moment (a backend
        # notices its parent's death at its next wait) and still commit there, with the standby
        # confirming: what counts is the first write on the other node.
        port = rig.state["nodes"][lost]["pg_port"]
        while port == rig.state["nodes"][lost]["pg_port"]:
            with contextlib.suppress(Unavailable):
                port = await _server_port(store)
            await asyncio.sleep(0.05)
            assert time.monotonic() - started < 90, "no write reached the other node"
        took = time.monotonic() - started
        record_property(
            FIGURES, f"HA: one store, whole node lost: writing on the other node after {took:.2f} s"
        )
        rig.start_node(lost)
        await asyncio.get_running_loop().run_in_executor(None, rig.wait_healthy, 120.0)
        assert rig.sync_standby() == lost
    finally:
        await store.close()
