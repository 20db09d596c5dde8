"""``tickwheel cron``: create, list, get, update, pause, resume, delete, preview, apply, history,
and ``run`` (the Cron Service as its own process)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from tickwheel.cli.commands.cron_show import (
    show_fire_times,
    show_history,
    show_job,
    show_jobs,
    show_plan,
)
from tickwheel.cli.commands.executions import parse_inputs, parse_instant
from tickwheel.cli.context import JsonFlag, explain, fail, print_json, resolve_api_key, state

if TYPE_CHECKING:
    # The SDK, the settings and the cron file's reader are imported by the command that runs:
    # ``tickwheel --help`` imports this module to list its commands.
    from tickwheel.client.sync import Client

app = typer.Typer(help="Cron jobs: recurring executions (or workflow runs).", no_args_is_help=True)
T = TypeVar("T")

Inputs = Annotated[list[str], typer.Option("--input", "-i", help="name=value (repeatable)")]
InputsJson = Annotated[str | None, typer.Option("--inputs", help="all inputs as a JSON object")]
Zone = Annotated[str | None, typer.Option("--timezone", "-z", help="IANA zone, e.g. Europe/Berlin")]
Version = Annotated[
    str | None, typer.Option("--definition-version", help="a version number, or 'latest'")
]
Workflow = Annotated[
    str | None,
    typer.Option("--workflow", "-w", help="start a run of this workflow per occurrence"),
]
WorkflowVersion = Annotated[
    str | None, typer.Option("--workflow-version", help="a version number, or 'latest'")
]
Misfire = Annotated[str | None, typer.Option("--misfire", help="skip | run_once | catch_up")]
MaxCatchUp = Annotated[int | None, typer.Option("--max-catch-up", min=1)]
Overlap = Annotated[str | None, typer.Option("--overlap", help="allow | forbid | replace")]
Jitter = Annotated[int | None, typer.Option("--jitter", min=0, help="seconds")]
StartAt = Annotated[str | None, typer.Option("--start-at", help="RFC 3339 time")]
EndAt = Annotated[str | None, typer.Option("--end-at", help="RFC 3339 time")]
Nonexistent = Annotated[
    str | None, typer.Option("--nonexistent", help="DST gap: shift_forward | skip")
]
Ambiguous = Annotated[
    str | None, typer.Option("--ambiguous", help="repeated hour: first | second | both")
]


def _call(ctx: typer.Context, action: Callable[[Client], T]) -> T:
    with state(ctx).client() as client:
        try:
            return action(client)
        except Exception as exc:
            raise explain(exc) from exc


def _options(**given: Any) -> dict[str, Any]:
    """The SDK keywords for the options given (None: not given)."""
    options: dict[str, Any] = {}
    for key in ("definition_version", "workflow_version"):
        version = given.pop(key, None)
        if version is not None:
            options[key] = None if version == "latest" else _int(version)
    dst = {"nonexistent": given.pop("nonexistent"), "ambiguous": given.pop("ambiguous")}
    if any(dst.values()):
        options["dst_policy"] = {k: v for k, v in dst.items() if v}
    for key in ("start_at", "end_at"):
        if given.get(key) is not None:
            options[key] = parse_instant(given.pop(key))
    options.update({k: v for k, v in given.items() if v is not None})
    return options


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a version number or 'latest'") from None


@app.command()
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="unique per tenant")],
    expression: Annotated[str, typer.Option("--expression", "-e", help="e.g. '0 2 * * *'")],
    definition: Annotated[
        str | None, typer.Option("--definition", "-d", help="definition name or uri")
    ] = None,
    workflow: Workflow = None,
    workflow_version: WorkflowVersion = None,
    timezone: Zone = None,
    input_pairs: Inputs = [],  # noqa: B006 - typer reads, never mutates
    inputs_json: InputsJson = None,
    definition_version: Version = None,
    misfire: Misfire = None,
    max_catch_up: MaxCatchUp = None,
    overlap: Overlap = None,
    jitter: Jitter = None,
    start_at: StartAt = None,
    end_at: EndAt = None,
    nonexistent: Nonexistent = None,
    ambiguous: Ambiguous = None,
    as_json: JsonFlag = False,
) -> None:
    """Create a cron job that runs a definition (-d) or starts a workflow run (-w) at each
    occurrence; shows it with its next fire times."""
    inputs = parse_inputs(input_pairs, inputs_json)
    options = _options(
        workflow=workflow,
        workflow_version=workflow_version,
        definition_version=definition_version,
        misfire_policy=misfire,
        max_catch_up=max_catch_up,
        overlap_policy=overlap,
        jitter=jitter,
        start_at=start_at,
        end_at=end_at,
        nonexistent=nonexistent,
        ambiguous=ambiguous,
    )
    job = _call(
        ctx,
        lambda c: c.cron.create(
            name, definition, expression, timezone=timezone or "UTC", inputs=inputs, **options
        ),
    )
    show_job(job, state(ctx, as_json).as_json)


@app.command("list")
def list_(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(min=1, max=200)] = 50,
    cursor: Annotated[str | None, typer.Option(help="nextCursor of a previous page")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List cron jobs by name."""
    page = _call(ctx, lambda c: c.cron.list(cursor, limit))
    show_jobs(page.items, page.next_cursor, state(ctx, as_json).as_json)


@app.command()
def get(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="id or name")],
    as_json: JsonFlag = False,
) -> None:
    """Show a cron job and its next 5 fire times (UTC and local, DST-marked)."""
    show_job(_call(ctx, lambda c: c.cron.get(ref)), state(ctx, as_json).as_json)


@app.command()
def update(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="id or name")],
    expression: Annotated[str | None, typer.Option("--expression", "-e")] = None,
    timezone: Zone = None,
    definition: Annotated[str | None, typer.Option("--definition", "-d")] = None,
    workflow: Workflow = None,
    workflow_version: WorkflowVersion = None,
    input_pairs: Inputs = [],  # noqa: B006
    inputs_json: InputsJson = None,
    definition_version: Version = None,
    misfire: Misfire = None,
    max_catch_up: MaxCatchUp = None,
    overlap: Overlap = None,
    jitter: Jitter = None,
    start_at: StartAt = None,
    end_at: EndAt = None,
    nonexistent: Nonexistent = None,
    ambiguous: Ambiguous = None,
    version: Annotated[
        int | None, typer.Option("--version", help="fail if the job is no longer at it")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Change the fields given (a schedule change recomputes the next run; -d or -w switches
    the job to that target)."""
    options = _options(
        expression=expression,
        timezone=timezone,
        definition=definition,
        workflow=workflow,
        workflow_version=workflow_version,
        definition_version=definition_version,
        misfire_policy=misfire,
        max_catch_up=max_catch_up,
        overlap_policy=overlap,
        jitter=jitter,
        start_at=start_at,
        end_at=end_at,
        nonexistent=nonexistent,
        ambiguous=ambiguous,
    )
    if input_pairs or inputs_json:
        options["inputs"] = parse_inputs(input_pairs, inputs_json)
    if not options:
        raise fail("nothing to change: give at least one option (see --help)")
    job = _call(ctx, lambda c: c.cron.update(ref, version=version, **options))
    show_job(job, state(ctx, as_json).as_json)


@app.command()
def pause(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="id or name")],
    as_json: JsonFlag = False,
) -> None:
    """Stop materialising occurrences until resumed."""
    show_job(_call(ctx, lambda c: c.cron.pause(ref)), state(ctx, as_json).as_json)


@app.command()
def resume(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="id or name")],
    catch_up: Annotated[
        bool,
        typer.Option(
            "--catch-up/--no-catch-up",
            help="run what was missed per the misfire policy, or record it skipped",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Resume a paused cron job."""
    show_job(_call(ctx, lambda c: c.cron.resume(ref, catch_up)), state(ctx, as_json).as_json)


@app.command()
def delete(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="id or name")],
    version: Annotated[int | None, typer.Option("--version")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Delete a cron job and its history (the audit trail stays)."""
    result = _call(ctx, lambda c: c.cron.delete(ref, version))
    if state(ctx, as_json).as_json:
        print_json(result.to_wire())
    else:
        typer.echo(f"deleted {result.cron_job.name} ({result.cron_job.cron_job_id})")


@app.command()
def trigger(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="id or name")],
    key: Annotated[
        str | None, typer.Option(help="names this trigger: the same key runs it once")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run a cron job now, once, beside its schedule (its own idempotency key)."""
    result = _call(ctx, lambda c: c.cron.trigger(ref, key))
    if state(ctx, as_json).as_json:
        print_json(result.to_wire())
        return
    run = result.execution_id or result.workflow_run_id
    typer.echo(f"triggered {ref}: {run} (key {result.idempotency_key})")


@app.command()
def backfill(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="id or name")],
    start: Annotated[str, typer.Option("--from", help="RFC 3339, within the last 7 days")],
    end: Annotated[str, typer.Option("--to", help="RFC 3339, not in the future")],
    as_json: JsonFlag = False,
) -> None:
    """Run the occurrences of a past range that did not run, each under its own key (at most
    1,000); occurrences that ran already are listed, not run again."""
    from tickwheel.domain.clock import iso

    begin, until = parse_instant(start), parse_instant(end)
    result = _call(ctx, lambda c: c.cron.backfill(ref, begin, until))
    if state(ctx, as_json).as_json:
        print_json(result.to_wire())
        return
    for item in result.items:
        run = item.execution_id or item.workflow_run_id or "-"
        typer.echo(f"{iso(item.occurrence)}  {'created' if item.created else 'existing'}  {run}")
    summary = result.summary
    typer.echo(f"backfilled {ref}: {summary.created} created, {summary.existing} existing")


@app.command()
def preview(
    ctx: typer.Context,
    expression: Annotated[str, typer.Argument(help="e.g. '0 2 * * *' or @daily")],
    timezone: Zone = None,
    after: Annotated[str | None, typer.Option("--from", help="RFC 3339; default now")] = None,
    count: Annotated[int, typer.Option(min=1, max=100)] = 10,
    nonexistent: Nonexistent = None,
    ambiguous: Ambiguous = None,
    as_json: JsonFlag = False,
) -> None:
    """The next fire times of an expression, with what DST does to them. Stores nothing."""
    start = parse_instant(after) if after else None
    dst = {k: v for k, v in {"nonexistent": nonexistent, "ambiguous": ambiguous}.items() if v}
    times = _call(
        ctx,
        lambda c: c.cron.preview(
            expression, timezone=timezone or "UTC", after=start, count=count, dst_policy=dst
        ),
    )
    show_fire_times(times, state(ctx, as_json).as_json)


@app.command()
def history(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="id or name")],
    limit: Annotated[int, typer.Option(min=1, max=200)] = 20,
    cursor: Annotated[str | None, typer.Option(help="nextCursor of a previous page")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Occurrences, newest first: their executions, or why they did not run."""
    page = _call(ctx, lambda c: c.cron.history(ref, cursor, limit))
    show_history(page.items, page.next_cursor, state(ctx, as_json).as_json)


@app.command()
def apply(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="YAML or JSON")],
    prune: Annotated[
        bool, typer.Option("--prune", help="delete jobs of the same --label the file omits")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the plan only")] = False,
    label: Annotated[
        str | None,
        typer.Option(help="the file's owner label: its jobs carry it, --prune keeps to it"),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Reconcile the cron jobs of a file with the server, by name; prints the plan. Safe to
    run again after a timeout: a retry prints the first apply's result."""
    from tickwheel.client.cron import load_cron_file

    try:
        docs = load_cron_file(file)
    except (OSError, ValueError) as exc:
        raise fail(str(exc)) from exc
    result = _call(ctx, lambda c: c.cron.apply(docs, prune=prune, dry_run=dry_run, label=label))
    show_plan(result, state(ctx, as_json).as_json)


@app.command()
def run(
    ctx: typer.Context,
    url: Annotated[str | None, typer.Option(help="API base URL (default: tickwheel --url)")] = None,
    api_key: Annotated[
        str | None, typer.Option(help="a submit key of --tenant (default: tickwheel --api-key)")
    ] = None,
    database_url: Annotated[str | None, typer.Option(envvar="TICKWHEEL_DATABASE_URL")] = None,
    tenant: Annotated[str | None, typer.Option(help="whose cron jobs to run")] = None,
    lead: Annotated[float | None, typer.Option(help="seconds to materialise ahead")] = None,
    claim: Annotated[float | None, typer.Option(help="seconds a claim on a job lasts")] = None,
    log_level: Annotated[str | None, typer.Option(envvar="TICKWHEEL_LOG_LEVEL")] = None,
) -> None:
    """Run the Cron Service alone: due cron jobs of one tenant, from the database, become
    executions through the API. Run as many as you like against one PostgreSQL."""
    import asyncio

    from tickwheel.config import Settings
    from tickwheel.observability.logs import configure_logging

    cli = state(ctx)
    given: dict[str, Any] = {
        "database_url": database_url,
        "log_level": log_level,
        "tenant": tenant,
        "cron_lead_seconds": lead,
        "cron_claim_seconds": claim,
    }
    settings = Settings(**{k: v for k, v in given.items() if v is not None})
    configure_logging(settings.log_level.upper())
    key = resolve_api_key(api_key) if api_key else cli.api_key
    # Imported here: the server pulls in the web stack, which no other command needs at start.
    from tickwheel.server import StartupError, run_cron

    try:
        asyncio.run(run_cron(settings, url or cli.url, key, settings.tenant))
    except (StartupError, OSError) as exc:
        raise fail(str(exc)) from exc
    except Exception as exc:  # the API refused or could not be reached at start
        raise explain(exc) from exc
