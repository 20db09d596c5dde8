"""The scheduler's lease and window come from ``TICKWHEEL_*`` settings and from the flags of
``tickwheel scheduler``; a window the due hints cannot cover is refused."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from tickwheel import server
from tickwheel.cli.main import app
from tickwheel.config import Settings
from tickwheel.engine.scheduler import Scheduler
from tickwheel.server import Engine
from tickwheel.store.protocol import Store


async def test_settings_reach_the_scheduler(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKWHEEL_SHARD_LEASE_SECONDS", "6")
    monkeypatch.setenv("TICKWHEEL_WHEEL_WINDOW_SECONDS", "12")
    engine = Engine(store, Settings(_env_file=None), worker=False, leased=True)
    [scheduler] = [s for s in engine.services if isinstance(s, Scheduler)]
    assert scheduler.lease_ttl == timedelta(seconds=6)
    assert scheduler.renew_every == timedelta(seconds=2)
    assert scheduler.window == timedelta(seconds=12) and scheduler.leased


def test_the_window_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKWHEEL_WHEEL_WINDOW_SECONDS", "3600")
    with pytest.raises(ValidationError, match="wheel_window_seconds"):
        Settings(_env_file=None)


def test_scheduler_flags_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Settings] = []

    async def run_roles(settings: Settings, **roles_: Any) -> None:
        seen.append(settings)

    # The command imports the server when it runs (not at CLI start): replaced there.
    monkeypatch.setattr(server, "run_roles", run_roles)
    # It would end this very process if an earlier test left a job thread behind.
    monkeypatch.setattr(server, "exit_past_stuck_jobs", lambda: None)
    monkeypatch.setenv("TICKWHEEL_SHARD_LEASE_SECONDS", "20")
    args = ["scheduler", "--shard-lease", "4", "--window", "9", "--database-url", "sqlite:///x"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    [settings] = seen
    assert (settings.shard_lease_seconds, settings.wheel_window_seconds) == (4.0, 9.0)
    refused = CliRunner().invoke(app, ["scheduler", "--window", "601"])
    assert refused.exit_code == 2 and "less than or equal to 600" in refused.output
