"""``tickwheel worker``, ``scheduler`` and ``orchestrator``: one role per process, for scale."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tickwheel.cli.context import fail

if TYPE_CHECKING:
    # The settings (pydantic-settings) are loaded by the command that runs, not by ``tickwheel
    # --help``, which imports this module to list the roles.
    from tickwheel.config import Settings

DatabaseUrl = Annotated[str | None, typer.Option(envvar="TICKWHEEL_DATABASE_URL")]
LogLevel = Annotated[str | None, typer.Option(envvar="TICKWHEEL_LOG_LEVEL")]

# The run policy (docs/worker_policy.md): each flag is repeatable and replaces its setting.
PythonModules = Annotated[
    list[str] | None,
    typer.Option(
        "--python-module", help="allow python entrypoints from this module prefix (repeatable)"
    ),
]
Commands = Annotated[
    list[str] | None,
    typer.Option("--command", help="enable command executions of this executable; '*': any"),
]
ContainerImages = Annotated[
    list[str] | None,
    typer.Option("--container-image", help="enable containers of this image pattern; '*': any"),
]
HttpAllowNetworks = Annotated[
    list[str] | None,
    typer.Option("--http-allow-network", help="let http executions reach this CIDR (repeatable)"),
]
HttpAllowHosts = Annotated[
    list[str] | None,
    typer.Option("--http-allow-host", help="let http executions reach this host name"),
]
SecretsFile = Annotated[
    Path | None,
    typer.Option(help="NAME=value lines (mode 0600) for ${{ secrets.NAME }} references"),
]


def policy_settings(
    python_modules: list[str] | None = None,
    commands: list[str] | None = None,
    container_images: list[str] | None = None,
    http_allow_networks: list[str] | None = None,
    http_allow_hosts: list[str] | None = None,
    secrets_file: Path | None = None,
) -> dict[str, str | None]:
    """The run-policy flags as Settings overrides (None: the environment's value stands)."""
    lists = {
        "python_modules": python_modules,
        "commands": commands,
        "container_images": container_images,
        "http_allow_networks": http_allow_networks,
        "http_allow_hosts": http_allow_hosts,
    }
    given: dict[str, str | None] = {k: ",".join(v) if v else None for k, v in lists.items()}
    given["secrets_file"] = str(secrets_file) if secrets_file else None
    return given


def load_settings(**given: Any) -> Settings:
    """Settings from the environment with ``given`` (flags; None: not given) on top; a bad value
    is a one-line error naming the setting, not a traceback."""
    from pydantic import ValidationError

    from tickwheel.config import Settings

    try:
        return Settings(**{k: v for k, v in given.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise fail(f"invalid setting: {problems}") from None


def _settings(**given: Any) -> Settings:
    from tickwheel.observability.logs import configure_logging

    settings = load_settings(**given)
    configure_logging(settings.log_level)
    return settings


def _run(settings: Settings, **roles: Any) -> None:
    # Imported here: the server pulls in the web stack, which no other command needs at start.
    import asyncio

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
    cancel_grace: Annotated[
        float | None,
        typer.Option(min=0, help="a cancelled command: seconds from SIGTERM to SIGKILL"),
    ] = None,
    path: Annotated[
        list[Path], typer.Option(help="add to sys.path for python entrypoints (repeatable)")
    ] = [Path()],  # noqa: B006 - typer reads, never mutates
    app: Annotated[
        list[str] | None,
        typer.Option(help="module:attr of a tickwheel.App: register its jobs (repeatable)"),
    ] = None,
    with_scheduler: Annotated[
        bool,
        typer.Option(
            "--with-scheduler",
            help="also run a scheduler (and reaper) in this process: one process per machine"
            " instead of a scheduler and workers apart (TICKWHEEL_SHARD_LEASE_SECONDS and"
            " TICKWHEEL_WHEEL_WINDOW_SECONDS tune it)",
        ),
    ] = False,
    python_module: PythonModules = None,
    command: Commands = None,
    container_image: ContainerImages = None,
    http_allow_network: HttpAllowNetworks = None,
    http_allow_host: HttpAllowHosts = None,
    secrets_file: SecretsFile = None,
    database_url: DatabaseUrl = None,
    log_level: LogLevel = None,
) -> None:
    """Run a worker: claim READY executions and run them (only what its run policy allows:
    see docs/worker_policy.md). With --with-scheduler it also promotes due executions and
    reaps lost leases, sharing the shards with every other scheduler."""
    for entry in reversed(path):
        sys.path.insert(0, str(entry.resolve()))
    settings = _settings(
        **policy_settings(
            python_module,
            command,
            container_image,
            http_allow_network,
            http_allow_host,
            secrets_file,
        ),
        # The default python rule runs modules found under these folders only.
        python_paths=",".join(str(entry.resolve()) for entry in path),
        worker_concurrency=concurrency,
        definitions_dir=str(definitions) if definitions else None,
        apps=",".join(app) if app else None,
        lease_seconds=lease,
        shutdown_grace_seconds=grace,
        cancel_grace_seconds=cancel_grace,
        worker_finish_batch=finish_batch,
        worker_finish_interval=finish_interval,
        database_url=database_url,
        log_level=log_level,
    )
    _run(settings, scheduler=with_scheduler, worker=True, worker_id=worker_id)


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
