"""definitions apply | list | show (pause | resume | flow: cli/commands/flow.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tickwheel.cli.context import JsonFlag, console, explain, print_json, state

app = typer.Typer(help="Register and read Job Definitions.", no_args_is_help=True)


@app.command()
def apply(
    ctx: typer.Context,
    files: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False)],
    shared: Annotated[
        bool,
        typer.Option(
            "--shared", help="publish to the shared registry every tenant sees (operator key)"
        ),
    ] = False,
) -> None:
    """Register definition files (YAML, JSON or XML) into your tenant, or with --shared into the
    shared registry. Unchanged ones are left as they are."""
    cli = state(ctx)
    with cli.client() as client:
        for path in files:
            try:
                applied = client.apply_definition(path, shared=shared)
            except Exception as exc:
                console.print(f"[red]✗[/] {path}")
                raise explain(exc) from exc
            d = applied.definition
            verb = "[green]registered[/]" if applied.created else "[dim]unchanged[/]"
            where = "shared" if d.shared else f"tenant {d.owner}"
            console.print(f"{verb} {d.uri} version {d.version} ({where})  ({path})")


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """The latest version of each definition."""
    cli = state(ctx, as_json)
    with cli.client() as client:
        try:
            items = client.definitions()
        except Exception as exc:
            raise explain(exc) from exc
    if cli.as_json:
        print_json([d.to_wire() for d in items])
        return
    table = Table("uri", "version", "owner", "type", "inputs", "description")
    for d in items:
        table.add_row(
            d.uri,
            str(d.version),
            "shared" if d.shared else str(d.owner),
            d.execution["type"],
            ", ".join(d.inputs),
            d.description,
        )
    console.print(table)


@app.command()
def show(ctx: typer.Context, name: str, as_json: JsonFlag = False) -> None:
    """Every version of one definition (always JSON: ``--json`` is accepted and changes
    nothing)."""
    cli = state(ctx)
    with cli.client() as client:
        try:
            print_json([d.to_wire() for d in client.definition_versions(name)])
        except Exception as exc:
            raise explain(exc) from exc
