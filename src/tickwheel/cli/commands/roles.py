"""``tickwheel worker``, ``scheduler`` and ``orchestrator``: one role per process, for scale."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from tickwheel.cli.context import fail
from tickwheel.config import Settings
from tickwheel.observability.logs import configure_logging

DatabaseUrl = Annotated[str | None, typer.Option(envvar="TICKWHEEL_DATABASE_URL")]
LogLevel = Annotated[str | None, typer.Option(envvar="TICKWHEEL_LOG_LEVEL")]


def _settings(**given: Any) -> Settings:
    settings = Settings(**{k: v for k, v in given.items() if v is not None})
    configure_logging(settings.log_level)
    return settings


def _run(settings: Settings, **roles: Any) -> None:
    # Imported here: the server pulls in the web stack, which no other command needs at start.
    from tickwheel.server import StartupError, exit_past_stuck_jobs, run_roles

    try:
        asyncio.run(run_roles(settings, **roles))
    except (StartupError, OSError) as exc:
        raise fail(str(exc)) from exc
    exit_past_stuck_jobs()


def worker(
    concurrency: Annotated[int | None, typer.Option(min=1, help="attempts at once")] = None,
    definitions: Annotated[
        Path | None, typer.Option(help="register this folder's definition files first")
    ] = None,
    worker_id: Annotated[str | None, typer.Option(help="default: host-pid-random")] = None,
    lease: Annotated[
        float | None, typer.Option(help="lease seconds (renewed by heartbeats)")
    ] = None,
    grace: Annotated[float | None, typer.Option(help="SIGTERM: seconds to finish")] = None,
    finish_batch: Annotated[
        int | None, typer.Option(min=1, help="finished attempts reported per transaction, at most")
    ] = None,
    finish_interval: Annotated[
        float | None,
        typer.Option(min=0, help="seconds a finished attempt may wait to share a transaction"),
    ] = None,
    path: Annotated[
        list[Path], typer.Option(help="add to sys.path for python entrypoints (repeatable)")
    ] = [Path()],  # noqa: B006 - typer reads, never mutates
    database_url: DatabaseUrl = None,
    log_level: LogLevel = None,
) -> None:
    """Run a worker: claim READY executions and run them."""
    for entry in reversed(path):
        sys.path.insert(0, str(entry.resolve()))
    settings = _settings(
        worker_concurrency=concurrency,
        definitions_dir=str(definitions) if definitions else None,
        lease_seconds=lease,
        shutdown_grace_seconds=grace,
        worker_finish_batch=finish_batch,
        worker_finish_interval=finish_interval,
        database_url=database_url,
        log_level=log_level,
    )
    _run(settings, scheduler=False, worker=True, worker_id=worker_id)


def scheduler(
    shard_lease: Annotated[
        float | None,
        typer.Option(min=0.1, help="seconds a shard lease lasts (renewed every third of it)"),
    ] = None,
    window: Annotated[
        float | None,
        typer.Option(min=0.1, max=600, help="seconds of due executions kept in the timing wheel"),
    ] = None,
    database_url: DatabaseUrl = None,
    log_level: LogLevel = None,
) -> None:
    """Run a scheduler (and reaper): due executions become READY, lost leases are recovered."""
    settings = _settings(
        shard_lease_seconds=shard_lease,
        wheel_window_seconds=window,
        database_url=database_url,
        log_level=log_level,
    )
    _run(settings, scheduler=True, worker=False)


def orchestrator(database_url: DatabaseUrl = None, log_level: LogLevel = None) -> None:
    """Run a workflow orchestrator: finished task executions advance their workflow runs."""
    settings = _settings(database_url=database_url, log_level=log_level)
    _run(settings, scheduler=False, worker=False, orchestrator=True)
