"""The ``tickwheel`` command. Rich output lives in the CLI only."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from tickwheel.cli.commands import (
    admin,
    cron,
    definitions,
    executions,
    flow,
    roles,
    webhooks,
    workflows,
)
from tickwheel.cli.commands.partitions import app as partitions_app
from tickwheel.cli.commands.prune import prune_command
from tickwheel.cli.commands.server import server
from tickwheel.cli.context import EXIT_CODES_HELP, CliState, resolve_api_key

app = typer.Typer(
    name="tickwheel",
    help="tickwheel: run jobs at a time, after a delay or on a schedule, at least once.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    epilog=EXIT_CODES_HELP,
)


@app.callback()
def main_options(
    ctx: typer.Context,
    url: Annotated[
        str, typer.Option(envvar="TICKWHEEL_URL", help="API base URL")
    ] = "http://127.0.0.1:8000",
    api_key: Annotated[
        str | None,
        typer.Option(envvar="TICKWHEEL_API_KEY", help="default: the local admin key file"),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="print JSON instead of tables (also after the command)")
    ] = False,
) -> None:
    ctx.obj = CliState(url=url, api_key=resolve_api_key(api_key), as_json=as_json)


executions.register(app)
flow.register(definitions.app)
app.add_typer(definitions.app, name="definitions")
app.add_typer(flow.tenant_app, name="tenant")
app.add_typer(admin.keys_app, name="keys")
app.add_typer(admin.db_app, name="db")
admin.db_app.add_typer(partitions_app, name="partitions")
app.add_typer(cron.app, name="cron")
app.add_typer(workflows.app, name="workflows")
app.add_typer(webhooks.app, name="webhooks")
app.command()(server)
app.command()(roles.worker)
app.command()(roles.scheduler)
app.command()(roles.orchestrator)
app.command("prune")(prune_command)


def main() -> None:
    os.environ.setdefault("COLUMNS", "120")
    app()


if __name__ == "__main__":
    main()
