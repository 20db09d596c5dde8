"""A role process starts with the garbage collector paused: its start is imports and the
engine's construction, objects that live as long as the process. Collection resumes once the
engine is built, those objects frozen out of its reach; every other command gets it back before
it runs."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tickwheel import server
from tickwheel.cli import main as cli_main
from tickwheel.config import Settings
from tickwheel.server import roles
from tickwheel.server.in_process import Engine


@pytest.fixture
def collecting() -> Iterator[None]:
    """Whatever a test does to the collector is undone."""
    try:
        yield
    finally:
        gc.unfreeze()
        gc.enable()


def test_a_role_command_runs_with_the_collector_paused(
    collecting: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []

    async def run_roles(settings: Settings, **roles_: Any) -> None:
        seen.append(gc.isenabled())

    monkeypatch.setattr(server, "run_roles", run_roles)
    monkeypatch.setattr(server, "exit_past_stuck_jobs", lambda: None)
    argv = ["tickwheel", "worker", "--with-scheduler", "--database-url", "sqlite:///x"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as ended:
        cli_main.main()
    assert ended.value.code in (0, None)
    assert seen == [False] and gc.isenabled()


@pytest.mark.parametrize(("command", "collects"), [("worker", False), ("db", True), (None, True)])
def test_other_commands_get_the_collector_back_before_they_run(
    collecting: None, command: str | None, collects: bool
) -> None:
    gc.disable()
    context = SimpleNamespace(invoked_subcommand=command, obj=None)
    cli_main.main_options(context, api_key="k")  # type: ignore[arg-type]
    assert gc.isenabled() is collects


async def test_a_role_resumes_collection_with_its_start_frozen_before_its_services_run(
    collecting: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[tuple[bool, int]] = []

    class Started(Exception):
        pass

    def start(engine: Engine) -> None:
        seen.append((gc.isenabled(), gc.get_freeze_count()))
        raise Started

    monkeypatch.setattr(Engine, "start", start)
    monkeypatch.setattr(Engine, "stop", lambda engine, grace: _nothing())
    settings = Settings(_env_file=None, database_url=f"sqlite:///{tmp_path / 't.db'}")
    gc.disable()
    with pytest.raises(Started):
        await roles.run_roles(settings, scheduler=True, worker=True)
    [(enabled, frozen)] = seen
    assert enabled and frozen > 0


async def _nothing() -> None:
    return None


def test_the_roles_that_start_paused_are_the_role_commands() -> None:
    """Each of them resumes collection in ``run_roles``: a command listed here that did not
    would run without a collector."""
    role_commands = {
        name for name, register in cli_main.COMMANDS.items() if register is cli_main._roles
    }
    assert role_commands == cli_main.ROLES
