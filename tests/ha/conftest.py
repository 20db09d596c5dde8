"""The HA rig of ``scripts/ha_rig.py`` (etcd and two Patroni-managed PostgreSQL nodes, one a
synchronous standby) for the tests marked ``ha``: one rig per session, brought up in a temporary
directory on free ports and stopped by pid afterwards.

Without Patroni, etcd or the PostgreSQL server binaries the tests skip with the reason, except
under ``CI=true``, where that is a failure: CI installs them (``.ci/run``) and must run them."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import IN_CI

REPO = Path(__file__).resolve().parents[2]
DATABASE = "tickwheel"
FIGURES = "ha_figures"
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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    figures = [
        str(value)
        for outcome in ("passed", "failed")
        for report in terminalreporter.stats.get(outcome, [])
        for name, value in getattr(report, "user_properties", ())
        if name == FIGURES
    ]
    if figures:
        terminalreporter.section("HA failover figures")
        for text in figures:
            terminalreporter.write_line(text)
