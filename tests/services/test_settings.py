"""Each service's defaults are written once (services/settings.py): a service built with no
settings, the server and every command started with no flags and no ``TICKWHEEL_*`` variable
all run with them; a variable reaches the service it tunes."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from tickwheel import server
from tickwheel.cli.main import app
from tickwheel.config import Settings
from tickwheel.cron.service import CronService
from tickwheel.engine.pruner import Pruner
from tickwheel.engine.reaper import Reaper
from tickwheel.engine.scheduler import Scheduler
from tickwheel.engine.worker import Worker
from tickwheel.server import Engine
from tickwheel.services.settings import (
    CronSettings,
    OrchestratorSettings,
    PrunerSettings,
    ReaperSettings,
    SchedulerSettings,
    WorkerSettings,
)
from tickwheel.store.protocol import Store
from tickwheel.workflows.orchestrator import Orchestrator


@pytest.fixture(autouse=True)
def no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("TICKWHEEL_"):
            monkeypatch.delenv(name)


def assert_defaults(settings: Settings) -> None:
    assert settings.scheduler_settings() == SchedulerSettings()
    assert settings.worker_settings() == WorkerSettings()
    assert settings.pruner_settings() == PrunerSettings()
    assert settings.cron_settings() == CronSettings()
    assert settings.orchestrator_settings() == OrchestratorSettings()


def test_the_environment_unset_gives_the_services_their_defaults() -> None:
    assert_defaults(Settings())


@pytest.mark.parametrize(
    ("variable", "value", "built"),
    [
        ("SHARD_LEASE_SECONDS", "6", lambda s: s.scheduler_settings().shard_lease.total_seconds()),
        ("WHEEL_WINDOW_SECONDS", "12", lambda s: s.scheduler_settings().window.total_seconds()),
        ("WORKER_CONCURRENCY", "9", lambda s: s.worker_settings().concurrency),
        ("LEASE_SECONDS", "7", lambda s: s.worker_settings().lease.total_seconds()),
        ("MAX_INLINE_OUTPUT_BYTES", "100", lambda s: s.worker_settings().max_inline_output),
        ("WORKER_FINISH_BATCH", "5", lambda s: s.worker_settings().finish_batch),
        ("WORKER_FINISH_INTERVAL", "0.5", lambda s: s.worker_settings().finish_interval),
        ("RETENTION_DAYS", "2", lambda s: s.pruner_settings().retention / timedelta(days=1)),
        ("CRON_LEAD_SECONDS", "45", lambda s: s.cron_settings().lead.total_seconds()),
        ("CRON_MISFIRE_GRACE_SECONDS", "5", lambda s: s.cron_settings().grace.total_seconds()),
        ("CRON_CLAIM_SECONDS", "8", lambda s: s.cron_settings().lease.total_seconds()),
        ("ORCHESTRATOR_CLAIM_SECONDS", "4", lambda s: s.orchestrator_settings().lease.seconds),
        ("WORKFLOW_STALL_SECONDS", "3", lambda s: s.orchestrator_settings().sweep_every.seconds),
    ],
)
def test_a_variable_reaches_the_service_it_tunes(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, built: Any
) -> None:
    monkeypatch.setenv(f"TICKWHEEL_{variable}", value)
    assert built(Settings()) == float(value)


def test_a_retention_of_zero_runs_no_pruner() -> None:
    assert Settings(retention_days=0).pruner_settings() is None


async def test_services_built_bare_and_built_by_the_server_agree(store: Store) -> None:
    engine = Engine(store, Settings(), cron=True, orchestrator=True)
    by_type = {type(s): s for s in engine.services}
    bare_scheduler, built_scheduler = Scheduler(store), by_type[Scheduler]
    assert isinstance(built_scheduler, Scheduler)
    for name in ("batch", "max_sleep", "lease_ttl", "renew_every", "window"):
        assert getattr(built_scheduler, name) == getattr(bare_scheduler, name), name
    bare_worker, built_worker = Worker(store), engine.worker
    assert built_worker is not None
    for name in ("concurrency", "lease", "poll", "max_inline_output", "low_water", "claim_wait"):
        assert getattr(built_worker, name) == getattr(bare_worker, name), name
    assert (built_worker.results.batch, built_worker.results.interval) == (
        bare_worker.results.batch,
        bare_worker.results.interval,
    )
    for kind in (Reaper, Pruner):
        built, bare = by_type[kind], kind(store)
        for name in ("batch", "interval"):
            assert getattr(built, name) == getattr(bare, name), (kind, name)
    assert by_type[Pruner].retention == Pruner(store).retention  # type: ignore[attr-defined]
    assert engine.cron is not None and engine.orchestrator is not None
    bare_cron = CronService(engine.cron.store, engine.cron.client_for)
    for name in ("lead", "grace", "lease", "batch", "poll"):
        assert getattr(engine.cron, name) == getattr(bare_cron, name), name
    orchestrator = engine.orchestrator
    bare_orchestrator = Orchestrator(orchestrator.workflows, store, orchestrator.client_for)
    for name in ("lease", "batch", "poll", "stall_grace", "sweep_every"):
        assert getattr(orchestrator, name) == getattr(bare_orchestrator, name), name
    assert ReaperSettings().batch == by_type[Reaper].batch  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "command",
    [
        ["server"],
        ["worker"],
        ["scheduler"],
        ["orchestrator"],
        ["cron", "run", "--api-key", "k"],
    ],
)
def test_every_command_without_flags_runs_the_services_with_their_defaults(
    monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    seen: list[Settings] = []

    async def capture(settings: Settings, *args: Any, **kwargs: Any) -> None:
        seen.append(settings)

    # The commands import the server when they run (not at CLI start): replaced there.
    for entry in ("serve", "run_roles", "run_cron"):
        monkeypatch.setattr(server, entry, capture)
    # It would end this very process if an earlier test left a job thread behind.
    monkeypatch.setattr(server, "exit_past_stuck_jobs", lambda: None)
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 0, result.output
    [settings] = seen
    assert_defaults(settings)
