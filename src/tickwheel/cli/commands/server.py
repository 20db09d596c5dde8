"""``tickwheel server``: everything in one process."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tickwheel.cli.commands.roles import (
    Commands,
    ContainerImages,
    HttpAllowHosts,
    HttpAllowNetworks,
    PythonModules,
    SecretsFile,
    load_settings,
    policy_settings,
)
from tickwheel.cli.context import console, err_console, fail

if TYPE_CHECKING:
    from tickwheel.config import Settings
    from tickwheel.server import FirstKey


def _announce(settings: Settings, first_key: FirstKey | None) -> None:
    from tickwheel.store.factory import redact

    console.print(
        f"tickwheel on http://{settings.host}:{settings.port}"
        f"  database {redact(settings.database_url)}"
    )
    if first_key is not None:
        console.print("[bold]First start: created an operator API key (shown only this once):[/]")
        console.print(first_key.secret, soft_wrap=True, highlight=False)
        console.print(f"It is also in {first_key.path} (readable only by you).")
    if settings.insecure_no_auth:
        err_console.print(
            "[bold red]WARNING: --insecure-no-auth: every request is admin of tenant "
            f"'{settings.tenant}'. Never use this beyond your own machine.[/]"
        )


def server(
    host: Annotated[str | None, typer.Option(envvar="TICKWHEEL_HOST")] = None,
    port: Annotated[int | None, typer.Option(envvar="TICKWHEEL_PORT")] = None,
    database_url: Annotated[str | None, typer.Option(envvar="TICKWHEEL_DATABASE_URL")] = None,
    definitions: Annotated[
        Path | None, typer.Option(help="register every definition file of this folder at start")
    ] = None,
    engine: Annotated[
        bool, typer.Option("--engine/--no-engine", help="run scheduler and workers in-process")
    ] = True,
    concurrency: Annotated[int | None, typer.Option(help="in-process worker concurrency")] = None,
    insecure_no_auth: Annotated[
        bool, typer.Option("--insecure-no-auth", help="no API keys (loopback only)")
    ] = False,
    python_module: PythonModules = None,
    command: Commands = None,
    container_image: ContainerImages = None,
    http_allow_network: HttpAllowNetworks = None,
    http_allow_host: HttpAllowHosts = None,
    secrets_file: SecretsFile = None,
    log_level: Annotated[str | None, typer.Option(envvar="TICKWHEEL_LOG_LEVEL")] = None,
) -> None:
    """Run the all-in-one server (API on SQLite by default). Its worker runs only what the run
    policy allows (docs/worker_policy.md); registration refuses what no worker would run."""
    policy = policy_settings(
        python_module, command, container_image, http_allow_network, http_allow_host, secrets_file
    )
    overrides: dict[str, Any] = {
        k: v
        for k, v in {
            **policy,
            "host": host,
            "port": port,
            "database_url": database_url,
            "definitions_dir": str(definitions) if definitions else None,
            "log_level": log_level,
            "worker_concurrency": concurrency,
        }.items()
        if v is not None
    }
    if insecure_no_auth:
        overrides["insecure_no_auth"] = True
    if not engine:
        overrides["engine"] = False
    from tickwheel.observability.logs import configure_logging

    settings = load_settings(**overrides)
    configure_logging(settings.log_level)
    # Imported here: the web stack is for this command only, not every CLI start.
    from tickwheel.server import StartupError, exit_past_stuck_jobs, run_on_fast_loop, serve

    try:
        run_on_fast_loop(serve(settings, _announce))
    except (StartupError, OSError) as exc:
        raise fail(str(exc)) from exc
    except KeyboardInterrupt:
        pass
    exit_past_stuck_jobs()
