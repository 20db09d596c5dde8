"""submit, get, list, attempts, cancel, replay, wait."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

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
from tickwheel.domain.definition_refs import short

if TYPE_CHECKING:
    # The SDK (pydantic's models, httpx) is imported by ``CliState.client()`` when a command
    # runs: ``tickwheel --help`` imports this module to list its commands.
    from tickwheel.client.models import ExecutionInfo
    from tickwheel.client.sync import Client

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$")
_UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
_STYLE = {
    "SUCCEEDED": "green",
    "FAILED": "red",
    "CANCELLED": "dim",
    "EXPIRED": "magenta",
    "RUNNING": "cyan",
    "RETRY_WAIT": "yellow",
}


def parse_duration(text: str) -> float:
    match = _DURATION.match(text.strip())
    if not match:
        raise typer.BadParameter(f"{text!r} is not a duration like 30s, 5m, 2h or 1d")
    return float(match.group(1)) * _UNIT[match.group(2)]


def parse_instant(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise typer.BadParameter(f"--at {text!r} is not an RFC 3339 time") from exc
    if value.tzinfo is None:
        raise typer.BadParameter(f"--at {text!r} needs an offset, e.g. Z or +02:00")
    return value


def parse_inputs(pairs: list[str], inputs_json: str | None) -> dict[str, Any]:
    """``--input k=v`` (v read as JSON when it is JSON, else as text) on top of ``--inputs``."""
    inputs: dict[str, Any] = {}
    if inputs_json:
        try:
            loaded = json.loads(inputs_json)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"--inputs is not valid JSON: {exc}") from exc
        if not isinstance(loaded, dict):
            raise typer.BadParameter("--inputs must be a JSON object")
        inputs.update(loaded)
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"--input {pair!r}: write it as name=value")
        try:
            inputs[name] = json.loads(raw)
        except json.JSONDecodeError:
            inputs[name] = raw
    return inputs


def show_execution(e: ExecutionInfo, as_json: bool) -> None:
    if as_json:
        print_json(e.to_wire())
        return
    from rich.table import Table

    table = Table(show_header=False, box=None)
    for label, value in (
        ("execution", str(e.execution_id)),
        ("status", f"[{_STYLE.get(str(e.status), 'white')}]{e.status}[/]"),
        ("definition", f"{e.definition_uri} v{e.definition_version}"),
        ("execute at", e.execute_at.isoformat()),
        ("inputs", json.dumps(e.inputs)),
        ("attempts", f"{e.attempt_count} of {e.max_attempts}"),
        ("idempotency key", e.idempotency_key or "-"),
        ("output", json.dumps(e.output) if e.output is not None else "-"),
        ("error", json.dumps(e.error) if e.error else "-"),
        *_running_rows(e),
    ):
        table.add_row(f"[bold]{label}[/]", value)
    console.print(table)


def _running_rows(e: ExecutionInfo) -> list[tuple[str, str]]:
    """Rows only for what is set: a cancel asked while it runs, progress, checkpoint."""
    rows: list[tuple[str, str]] = []
    if e.cancel_requested_at is not None:
        asked = e.cancel_requested_at.isoformat()
        rows.append(("cancel requested", f"{asked} (its worker stops it)"))
    if e.progress is not None:
        rows.append(("progress", f"{e.progress.fraction:.0%} {e.progress.message}".rstrip()))
    if e.checkpoint is not None:
        rows.append(("checkpoint", json.dumps(e.checkpoint)))
    if (c := e.concurrency) is not None:
        group = f"key {c.key!r}" if c.key else "the whole definition"
        rows.append(("concurrency", f"at most {c.limit} of {group} at once, order {c.order}"))
    return rows


def submit(
    ctx: typer.Context,
    definition: Annotated[str, typer.Argument(help="registry://jobs/<name> or just <name>")],
    input_pairs: Annotated[
        list[str], typer.Option("--input", "-i", help="name=value (repeatable)")
    ] = [],  # noqa: B006
    inputs_json: Annotated[
        str | None, typer.Option("--inputs", help="all inputs as a JSON object")
    ] = None,
    at: Annotated[
        str | None,
        typer.Option("--at", help="RFC 3339 time with offset, e.g. 2026-12-01T09:00:00Z"),
    ] = None,
    delay: Annotated[
        str | None, typer.Option("--in", help="delay instead of --at: 30s, 5m, 2h")
    ] = None,
    key: Annotated[str | None, typer.Option("--key", help="idempotency key")] = None,
    version: Annotated[
        int | None, typer.Option(help="pin a definition version (default: latest)")
    ] = None,
    priority: Annotated[int, typer.Option(help="higher runs first")] = 0,
    start_by: Annotated[
        str | None,
        typer.Option("--start-by", help="RFC 3339: not started by then, it ends EXPIRED"),
    ] = None,
    deadline: Annotated[
        str | None, typer.Option("--deadline", help="RFC 3339: no attempt starts after it")
    ] = None,
    concurrency_limit: Annotated[
        int | None,
        typer.Option(help="at most this many of its key run at once (overrides the definition)"),
    ] = None,
    concurrency_key: Annotated[
        str | None,
        typer.Option(help="the key, over the inputs: '${{ inputs.customer }}' (default: none)"),
    ] = None,
    concurrency_order: Annotated[
        str, typer.Option(help="fifo (start in executeAt order) or none")
    ] = "fifo",
    wait: Annotated[
        bool,
        typer.Option("--wait", help="wait until it finishes; the exit code says how it ended"),
    ] = False,
    timeout: Annotated[float, typer.Option(help="seconds to --wait")] = 120.0,
    as_json: JsonFlag = False,
) -> None:
    """Submit one execution.

    With --wait, the exit code says how it ended, for CI scripts that use it as a gate:
    0 SUCCEEDED, 3 FAILED, 4 CANCELLED or EXPIRED, 5 still not finished after --timeout
    (it goes on running). 1 is an error from or reaching the API, 2 a usage error or
    invalid input (nothing submitted)."""
    cli = state(ctx, as_json)
    if at is not None and delay is not None:
        raise fail("give --at or --in, not both")
    inputs = parse_inputs(input_pairs, inputs_json)
    execute_at = parse_instant(at) if at is not None else None
    after = timedelta(seconds=parse_duration(delay)) if delay is not None else None
    options: dict[str, Any] = {
        "start_by": parse_instant(start_by) if start_by is not None else None,
        "deadline": parse_instant(deadline) if deadline is not None else None,
    }
    if concurrency_limit is not None:
        options["concurrency"] = {"limit": concurrency_limit, "order": concurrency_order}
        if concurrency_key is not None:
            options["concurrency"]["key"] = concurrency_key
    elif concurrency_key is not None:
        raise fail("--concurrency-key needs --concurrency-limit", ExitCode.USAGE)
    with cli.client() as client:
        try:
            if after is not None:
                execute_at = client.after(after)
            e = client.submit(
                definition, inputs, execute_at, key, version=version, priority=priority, **options
            )
            if wait:
                with console.status(f"waiting for {e.execution_id} ({e.status})"):
                    e = client.wait(e.execution_id, timeout)
        except TimeoutError as exc:
            raise fail(f"{exc}; it goes on (tickwheel get <id>)", ExitCode.TIMEOUT) from exc
        except Exception as exc:
            raise explain(exc) from exc
    show_execution(e, cli.as_json)
    if wait and (code := exit_code_for(str(e.status))) is not ExitCode.OK:
        err_console.print(f"execution {e.execution_id} ended {e.status}")
        raise typer.Exit(code)


def get(ctx: typer.Context, execution_id: str, as_json: JsonFlag = False) -> None:
    """Show one execution."""
    _on_one(ctx, lambda client: client.get(execution_id), as_json)


def _on_one(ctx: typer.Context, action: Callable[[Client], ExecutionInfo], as_json: bool) -> None:
    """Runs one SDK call that answers with an execution, and shows it."""
    cli = state(ctx, as_json)
    with cli.client() as client:
        try:
            e = action(client)
        except Exception as exc:
            raise explain(exc) from exc
    show_execution(e, cli.as_json)


def list_(
    ctx: typer.Context,
    status: Annotated[list[str], typer.Option("--status", "-s", help="repeatable")] = [],  # noqa: B006
    definition: Annotated[str | None, typer.Option("--definition", "-d")] = None,
    key: Annotated[str | None, typer.Option("--key", help="idempotency key")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500)] = 20,
    cursor: Annotated[str | None, typer.Option(help="nextCursor of a previous page")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List executions, newest first."""
    cli = state(ctx, as_json)
    with cli.client() as client:
        try:
            page = client.list(
                status=[s.upper() for s in status],
                definition=definition,
                idempotency_key=key,
                limit=limit,
                cursor=cursor,
            )
        except Exception as exc:
            raise explain(exc) from exc
    if cli.as_json:
        print_json({"items": [e.to_wire() for e in page.items], "nextCursor": page.next_cursor})
        return
    from rich.table import Table

    table = Table("execution", "status", "definition", "execute at", "attempts")
    for e in page.items:
        style = _STYLE.get(str(e.status), "white")
        table.add_row(
            str(e.execution_id),
            f"[{style}]{e.status}[/]",
            f"{short(e.definition_uri)} v{e.definition_version}",
            e.execute_at.isoformat(),
            f"{e.attempt_count}/{e.max_attempts}",
        )
    console.print(table)
    if page.next_cursor:
        console.print(f"more: --cursor {page.next_cursor}")


def attempts(ctx: typer.Context, execution_id: str, as_json: JsonFlag = False) -> None:
    """Show the attempts of one execution."""
    cli = state(ctx, as_json)
    with cli.client() as client:
        try:
            items = client.attempts(execution_id)
        except Exception as exc:
            raise explain(exc) from exc
    if cli.as_json:
        print_json([a.to_wire() for a in items])
        return
    from rich.table import Table

    table = Table("#", "status", "worker", "fencing token", "started", "finished", "error")
    for a in items:
        table.add_row(
            str(a.attempt_number),
            str(a.status),
            a.worker_id,
            str(a.fencing_token),
            a.started_at.isoformat(),
            a.finished_at.isoformat() if a.finished_at else "-",
            json.dumps(a.error) if a.error else "-",
        )
    console.print(table)


def cancel(ctx: typer.Context, execution_id: str, as_json: JsonFlag = False) -> None:
    """Cancel an execution: one not started ends CANCELLED now; a RUNNING one is asked to stop
    (its worker stops the handler at its next heartbeat, then it ends CANCELLED)."""
    _on_one(ctx, lambda client: client.cancel(execution_id), as_json)


def replay(ctx: typer.Context, execution_id: str, as_json: JsonFlag = False) -> None:
    """Replay a FAILED execution (a dead letter) with a fresh attempt budget."""
    _on_one(ctx, lambda client: client.replay(execution_id), as_json)


def register(app: typer.Typer) -> None:
    app.command()(submit)
    app.command()(get)
    app.command("list")(list_)
    app.command()(attempts)
    app.command()(cancel)
    app.command()(replay)
