"""The HA rig of ``scripts/ha_rig.py`` (etcd and two Patroni-managed PostgreSQL nodes, one a
synchronous standby) for the tests marked ``ha``: one rig per session, brought up in a temporary
directory on free ports and stopped by pid afterwards.

Without Patroni, etcd or the PostgreSQL server binaries the tests skip with the reason, except
under ``CI=true``, where that is a failure: CI installs them (``.ci/run``) and must run them."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.acceptance.conftest import free_port
from tests.conftest import IN_CI
from tests.processes.conftest import Cluster, job_doc
from tickwheel.api.auth import create_key
from tickwheel.domain.models import Scope
from tickwheel.store.factory import open_store

REPO = Path(__file__).resolve().parents[2]
DATABASE = "tickwheel"
FIGURES = "ha_figures"  # tests/conftest.py prints them (HA_FIGURES)
"""The ``record_property`` name of the measured figures: the terminal summary prints them, so
that every run shows them without ``-s``, also from ``pytest-xdist`` workers."""


def load_rig_module() -> ModuleType:
    """``scripts/ha_rig.py``, the same file CI and people run, imported from its folder (as
    running it does: its sibling ``ha_patroni.py`` is imported the same way)."""
    folder = str(REPO / "scripts")
    if folder not in sys.path:
        sys.path.append(folder)
    return importlib.import_module("ha_rig")


ha_rig = load_rig_module()


@pytest.fixture
def rig(rig_session: Any) -> Any:
    """The session's rig once it has a primary and a streaming synchronous standby: a test
    must not begin while the previous one's old primary is still rejoining."""
    rig_session.wait_healthy(120)
    return rig_session


@pytest.fixture(scope="session")
def rig_session() -> Iterator[Any]:
    """A running rig with a migrated ``tickwheel`` database (migrated through the multi-host
    URL, as an operator would)."""
    reason = ha_rig.missing()
    if reason is not None:
        if IN_CI:
            pytest.fail(f"CI=true requires the HA rig: {reason}")
        pytest.skip(f"no HA rig here: {reason}")
    rig = ha_rig.Rig(Path(tempfile.mkdtemp(prefix="tw-ha-rig-")))
    try:
        rig.up(DATABASE)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
        tickwheel = Path(sys.executable).with_name("tickwheel")
        upgrade = subprocess.run(
            [str(tickwheel), "db", "upgrade", "--database-url", rig.url(DATABASE)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
        yield rig
    finally:
        rig.down()


def start_api(cluster: Cluster) -> tuple[str, str]:
    """An API server (no engine) of ``cluster``, with the ``slow`` job registered; its URL and
    its admin key."""
    port = free_port()
    cluster._start("api", ["server", "--no-engine", "--port", str(port)])
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    cluster.eventually(healthy, 30, "the API to answer /healthz")
    key_file = cluster.directory / "tickwheel.admin-key"
    # Only the first server on the session's database writes one; later ones get a key here.
    key = key_file.read_text().strip() if key_file.exists() else _operator_key(cluster.url)
    doc = job_doc("slow", "slow", inputs={"seconds": "number"},
                  outputs={"pid": "integer", "token": "integer"})  # fmt: skip
    put = httpx.put(
        f"{url}/v1/definitions", json=doc, headers={"Authorization": f"Bearer {key}"}, timeout=10
    )
    assert put.status_code in (200, 201), put.text
    return url, key


def _operator_key(url: str) -> str:
    async def create() -> str:
        store = await open_store(url, pool_size=1)
        try:
            now = datetime.now(UTC)
            _, secret = await create_key(store, "default", Scope.OPERATOR, "ha test", now)
            return secret
        finally:
            await store.close()

    return asyncio.run(create())
