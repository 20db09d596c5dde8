"""workflows apply | list | show | run | get | cancel | retry."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from tickwheel.cli.commands.executions import parse_inputs
from tickwheel.cli.context import (
    ExitCode,
    JsonFlag,
    console,
    err_console,
    exit_code_for,
    explain,
    fail,
    print_json,
    state,
)

if TYPE_CHECKING:
    # The SDK is imported by the command that runs: ``tickwheel --help`` imports this module to
    # list its commands.
    from tickwheel.client.sync import Client
    from tickwheel.client.workflows import WorkflowRun

app = typer.Typer(
    help="Register workflows and start, watch, cancel and retry their runs.", no_args_is_help=True
)

RunId = Annotated[str, typer.Argument(help="the workflowRunId")]


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
    """Register Workflow Definition files (YAML or JSON) into your tenant, or with --shared into
    the shared registry. Unchanged ones are left as they are."""
    with state(ctx).client() as client:
        for path in files:
            try:
                workflow, created = client.workflows.apply(path, shared=shared)
            except Exception as exc:
                console.print(f"[red]✗[/] {path}")
                raise explain(exc) from exc
            verb = "[green]registered[/]" if created else "[dim]unchanged[/]"
            where = "shared" if workflow.shared else f"tenant {workflow.owner}"
            name, version = workflow.name, workflow.version
            console.print(f"{verb} workflow {name} version {version} ({where})  ({path})")


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """The latest version of each workflow."""
    cli = state(ctx, as_json)
    with cli.client() as client:
        try:
            items = client.workflows.list()
        except Exception as exc:
            raise explain(exc) from exc
    if cli.as_json:
        print_json([w.to_wire() for w in items])
        return
    table = Table("name", "version", "owner", "tasks", "description")
    for w in items:
        names = ", ".join(t.name for t in w.tasks)
        owner = "shared" if w.shared else str(w.owner)
        table.add_row(w.name, str(w.version), owner, names, w.description)
    console.print(table)


@app.command()
def show(
    ctx: typer.Context,
    name: str,
    version: Annotated[int | None, typer.Option()] = None,
    as_json: JsonFlag = False,
) -> None:
    """One workflow (the latest version unless --version), always as JSON."""
    with state(ctx).client() as client:
        try:
            print_json(client.workflows.get(name, version).to_wire())
        except Exception as exc:
            raise explain(exc) from exc


@app.command()
def run(
    ctx: typer.Context,
    workflow: str,
    input_pairs: Annotated[
        list[str], typer.Option("--input", "-i", help="name=value (repeatable)")
    ] = [],  # noqa: B006 - typer reads, never mutates
    inputs_json: Annotated[str | None, typer.Option("--inputs", help="a JSON object")] = None,
    version: Annotated[int | None, typer.Option(help="default: the latest")] = None,
    key: Annotated[str | None, typer.Option("--idempotency-key", "-k")] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="wait until the run ends; the exit code says how")
    ] = False,
    timeout: Annotated[float, typer.Option(help="seconds to --wait")] = 600.0,
    as_json: JsonFlag = False,
) -> None:
    """Start a workflow run.

    With --wait, the exit code says how the run ended: 0 SUCCEEDED, 3 FAILED, 4 CANCELLED,
    5 still running after --timeout (it goes on). 1 is an error from or reaching the API,
    2 a usage error or invalid input (nothing started)."""
    cli = state(ctx, as_json)
    inputs = parse_inputs(input_pairs, inputs_json)
    with cli.client() as client:
        try:
            run = client.workflows.run(workflow, inputs, idempotency_key=key, version=version)
            if wait:
                with console.status(f"waiting for workflow run {run.workflow_run_id}"):
                    run = _wait_run(client, run, timeout)
        except TimeoutError as exc:
            raise fail(str(exc), ExitCode.TIMEOUT) from exc
        except Exception as exc:
            raise explain(exc) from exc
    show_run(run, cli.as_json)
    if wait and (code := exit_code_for(run.status)) is not ExitCode.OK:
        err_console.print(f"workflow run {run.workflow_run_id} ended {run.status}")
        raise typer.Exit(code)


def _wait_run(client: Client, run: WorkflowRun, timeout: float) -> WorkflowRun:
    """Polls the run until it is no longer RUNNING (a person's terminal, not a hot path)."""
    from tickwheel.domain.workflow_runs import RunStatus

    deadline = time.monotonic() + timeout
    interval = 0.2
    while run.status == RunStatus.RUNNING:
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"workflow run {run.workflow_run_id} is still RUNNING after {timeout} s; "
                "it goes on (tickwheel workflows get <id>)"
            )
        time.sleep(interval)
        interval = min(interval * 1.5, 2.0)
        run = client.workflows.get_run(run.workflow_run_id)
    return run


def _act(ctx: typer.Context, action: str, run_id: str, as_json: bool) -> None:
    cli = state(ctx, as_json)
    with cli.client() as client:
        try:
            run: WorkflowRun = getattr(client.workflows, action)(run_id)
        except Exception as exc:
            raise explain(exc) from exc
    show_run(run, cli.as_json)


@app.command()
def get(ctx: typer.Context, run_id: RunId, as_json: JsonFlag = False) -> None:
    """A run and each task run's status, execution and output."""
    _act(ctx, "get_run", run_id, as_json)


@app.command()
def cancel(ctx: typer.Context, run_id: RunId, as_json: JsonFlag = False) -> None:
    """Cancel the tasks not yet started; the run ends CANCELLED."""
    _act(ctx, "cancel", run_id, as_json)


@app.command()
def retry(ctx: typer.Context, run_id: RunId, as_json: JsonFlag = False) -> None:
    """Re-run the failed, skipped and cancelled tasks of a finished run."""
    _act(ctx, "retry", run_id, as_json)


def show_run(run: WorkflowRun, as_json: bool) -> None:
    if as_json:
        print_json(run.to_wire())
        return
    console.print(
        f"workflow run [bold]{run.workflow_run_id}[/] ({run.workflow} v{run.version}): {run.status}"
    )
    table = Table("task", "status", "execution", "output")
    for t in run.tasks:
        output = "" if t.output is None else str(t.output)[:60]
        table.add_row(t.name, t.status, str(t.execution_id or ""), output)
    console.print(table)
