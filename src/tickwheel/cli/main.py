"""The ``tickwheel`` command. Rich output lives in the CLI only.

The commands are registered lazily: each group of them is a function below that imports its
module and registers it as usual, run only when one of the names it provides is invoked (or
when the help lists them all). ``tickwheel worker`` thus imports the role commands alone, not
the SDK, the HTTP client, the web stack and the table printers of every other command: its
start-up, before the first claim, is mostly imports."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator, MutableMapping
from typing import Annotated, Any

import typer
import typer.main
from typer.core import TyperGroup

from tickwheel.cli.context import EXIT_CODES_HELP, CliState, resolve_api_key

Command = Any
"""A click command as Typer builds it (recent Typers carry their own copy of click, so the
``click`` package's class is not the one to name)."""

Register = Callable[[typer.Typer], None]
"""Registers a group of commands on the Typer it is given, exactly as the eager code would."""


def _executions(app: typer.Typer) -> None:
    from tickwheel.cli.commands import executions

    executions.register(app)


def _definitions(app: typer.Typer) -> None:
    from tickwheel.cli.commands import definitions, flow

    flow.register(definitions.app)
    app.add_typer(definitions.app, name="definitions")


def _tenant(app: typer.Typer) -> None:
    from tickwheel.cli.commands import flow

    app.add_typer(flow.tenant_app, name="tenant")


def _keys(app: typer.Typer) -> None:
    from tickwheel.cli.commands import admin

    app.add_typer(admin.keys_app, name="keys")


def _db(app: typer.Typer) -> None:
    from tickwheel.cli.commands import admin
    from tickwheel.cli.commands.partitions import app as partitions_app

    admin.db_app.add_typer(partitions_app, name="partitions")
    app.add_typer(admin.db_app, name="db")


def _cron(app: typer.Typer) -> None:
    from tickwheel.cli.commands import cron

    app.add_typer(cron.app, name="cron")


def _workflows(app: typer.Typer) -> None:
    from tickwheel.cli.commands import workflows

    app.add_typer(workflows.app, name="workflows")


def _webhooks(app: typer.Typer) -> None:
    from tickwheel.cli.commands import webhooks

    app.add_typer(webhooks.app, name="webhooks")


def _server(app: typer.Typer) -> None:
    from tickwheel.cli.commands.server import server

    app.command()(server)


def _roles(app: typer.Typer) -> None:
    from tickwheel.cli.commands import roles

    app.command()(roles.worker)
    app.command()(roles.scheduler)
    app.command()(roles.orchestrator)


def _prune(app: typer.Typer) -> None:
    from tickwheel.cli.commands.prune import prune_command

    app.command("prune")(prune_command)


# Every top-level command, in the order of ``tickwheel --help``, with what registers it. A new
# command is listed here too (tests/unit/test_startup_imports.py checks the names against what
# the registrations add).
COMMANDS: dict[str, Register] = {
    "submit": _executions,
    "get": _executions,
    "list": _executions,
    "attempts": _executions,
    "cancel": _executions,
    "replay": _executions,
    "server": _server,
    "worker": _roles,
    "scheduler": _roles,
    "orchestrator": _roles,
    "prune": _prune,
    # The groups (Typer lists them after the single commands).
    "definitions": _definitions,
    "tenant": _tenant,
    "keys": _keys,
    "db": _db,
    "cron": _cron,
    "workflows": _workflows,
    "webhooks": _webhooks,
}


_registered: dict[Register, typer.Typer] = {}


def load(register: Register) -> dict[str, Command]:
    """The click commands that ``register`` adds, built as Typer builds those of ``app`` (anew
    at every run of ``app``). The registration itself runs once per process, as it did at
    import: it may add commands to a module's own group."""
    scratch = _registered.get(register)
    if scratch is None:
        scratch = _registered[register] = typer.Typer()
        register(scratch)
    return dict(typer.main.get_group(scratch).commands)


class _LazyCommands(MutableMapping[str, Command]):
    """A group's commands, each built on first look-up: listing the names (the help, a typo's
    suggestions) imports nothing; getting one imports its module only."""

    def __init__(self, eager: MutableMapping[str, Command]) -> None:
        self._loaded = dict(eager)

    def __getitem__(self, name: str) -> Command:
        if name not in self._loaded and name in COMMANDS:
            for loaded, command in load(COMMANDS[name]).items():
                self._loaded.setdefault(loaded, command)
        return self._loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (name for name in self._loaded if name not in COMMANDS)

    def __len__(self) -> int:
        return len({*COMMANDS, *self._loaded})

    def __contains__(self, name: object) -> bool:
        return name in COMMANDS or name in self._loaded


class LazyGroup(TyperGroup):
    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _LazyCommands(self.commands)


app = typer.Typer(
    name="tickwheel",
    help="tickwheel: run jobs at a time, after a delay or on a schedule, at least once.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    epilog=EXIT_CODES_HELP,
    cls=LazyGroup,
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
    if ctx.invoked_subcommand not in ROLES:
        gc.enable()  # (a role resumes collection once its engine is built: ``run_roles``)


ROLES = frozenset({"worker", "scheduler", "orchestrator"})
"""The role processes (``tickwheel.server.roles``), which start with the collector paused."""


def main() -> None:
    os.environ.setdefault("COLUMNS", "120")
    # The start of a command is imports, and a role's also the engine's construction: some
    # 60,000 objects that live as long as the process. Collecting while they are made found
    # nothing to free and took ~65 ms of a role's ~550 ms of CPU before its first claim
    # (docs/scaling.md). Paused from here; resumed before any command runs (``main_options``),
    # or by a role once its engine is built, those objects then frozen out of reach.
    gc.disable()
    try:
        app()
    finally:
        gc.enable()


if __name__ == "__main__":
    main()
