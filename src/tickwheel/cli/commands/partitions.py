"""``tickwheel db partitions ...``: monthly partitioning of the executions table, a PostgreSQL
option for large run histories (docs/scaling.md). Like ``db upgrade``, these work on the
database directly and need no API key."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from tickwheel.cli.commands.admin import DatabaseUrl, default_database_url, with_store
from tickwheel.cli.commands.prune import parse_age
from tickwheel.cli.context import JsonFlag, console, fail, print_json, state
from tickwheel.domain.retention import DROP_BATCH

if TYPE_CHECKING:
    # The partition manager is the PostgreSQL store's (psycopg and all): each command imports
    # it when it runs (``_partitions``), ``tickwheel db --help`` never.
    from tickwheel.store.postgres.partitions import (
        DropOutcome,
        EnableReport,
        EnsureReport,
        ExecutionPartitions,
        Partition,
    )
    from tickwheel.store.protocol import Store

app = typer.Typer(
    help="Monthly partitions of the executions table (PostgreSQL only; see docs/scaling.md).",
    no_args_is_help=True,
)
Ahead = Annotated[
    int, typer.Option("--ahead", min=0, help="months after the current one to have ready")
]


def _postgres_url(database_url: str | None) -> str:
    """Refuses SQLite before opening anything, so a typo'd path makes no new database file."""
    url = database_url or default_database_url()
    if not url.startswith(("postgresql://", "postgres://")):
        raise fail(
            "partitioning is a PostgreSQL option: the SQLite store keeps executions in one"
            " table (set --database-url or TICKWHEEL_DATABASE_URL to a postgresql:// URL)"
        )
    return url


def _partitions(store: Store) -> ExecutionPartitions:
    from tickwheel.store.postgres.partitions import partitions_for

    return partitions_for(store)


def _now() -> datetime:
    from tickwheel.domain.clock import SystemClock

    return SystemClock().now()


@app.command()
def enable(
    ahead: Ahead = 3,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="convert although workers or schedulers still seem to be running"
        ),
    ] = False,
    database_url: DatabaseUrl = None,
) -> None:
    """Convert executions to monthly partitions, in one transaction under an exclusive lock.

    For a maintenance window: stop schedulers, workers and API first. Every row is copied; the
    time it takes grows with the table (see docs/scaling.md). A failure changes nothing."""
    url = _postgres_url(database_url)

    async def work(store: Store) -> EnableReport:
        return await _partitions(store).enable(_now(), ahead, force=force)

    with console.status("converting executions to monthly partitions..."):
        report = with_store(url, work)
    console.print(
        f"[green]partitioned[/] executions: {report.rows} rows copied into"
        f" {len(report.partitions)} partitions in {report.seconds:.1f} s"
    )
    console.print("keep months ahead with 'tickwheel db partitions ensure' (daily, from cron)")


@app.command()
def ensure(ahead: Ahead = 3, database_url: DatabaseUrl = None) -> None:
    """Create this month's partition and the next --ahead ones if missing (idempotent)."""
    url = _postgres_url(database_url)

    async def work(store: Store) -> EnsureReport:
        return await _partitions(store).ensure(_now(), ahead)

    report = with_store(url, work)
    for name in report.created:
        console.print(f"[green]created[/] {name}")
    for name in report.existing:
        console.print(f"exists  {name}")
    for name, why in report.skipped.items():
        console.print(f"[yellow]skipped[/] {name}: {why}")
    if report.skipped:
        raise typer.Exit(1)


@app.command()
def drop(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than", help="drop months whose executions all finished longer ago: 90d, 12w"
        ),
    ] = "90d",
    force: Annotated[
        bool,
        typer.Option("--force", help="drop a month even if it holds unfinished executions"),
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="only say what would go")] = False,
    batch: Annotated[int, typer.Option(min=1, help="child rows deleted per statement")] = (
        DROP_BATCH
    ),
    database_url: DatabaseUrl = None,
) -> None:
    """Drop monthly partitions older than an age, with their attempts, history and outputs.

    A month whose executions are not all finished before the cut-off is kept and named, and the
    command exits with 1; --force drops it anyway (its unfinished executions are lost)."""
    url = _postgres_url(database_url)
    try:
        age = parse_age(older_than)
    except ValueError as exc:
        raise fail(str(exc)) from exc

    async def work(store: Store) -> list[DropOutcome]:
        parts = _partitions(store)
        return await parts.drop(_now(), age, force=force, dry_run=dry_run, batch=batch)

    outcomes = with_store(url, work)
    if not outcomes:
        console.print(f"no partition older than {older_than}")
        return
    from rich.table import Table

    table = Table("partition", "outcome", "unfinished", "finished recently")
    for o in outcomes:
        style = "green" if o.dropped else "yellow"
        table.add_row(o.partition, f"[{style}]{o.reason}[/]", str(o.live), str(o.recent))
    console.print(table)
    if any(not o.dropped for o in outcomes) and not dry_run:
        raise typer.Exit(1)


@app.command("list")
def list_partitions(
    ctx: typer.Context, database_url: DatabaseUrl = None, as_json: JsonFlag = False
) -> None:
    """The partitions of executions: month, estimated rows, size on disk."""
    url = _postgres_url(database_url)

    async def work(store: Store) -> list[Partition]:
        return await _partitions(store).list_partitions()

    partitions = with_store(url, work)
    if state(ctx, as_json).as_json:
        print_json(
            [
                {
                    "partition": p.name,
                    "from": p.start.isoformat() if p.start else None,
                    "to": p.end.isoformat() if p.end else None,
                    "rowsEstimate": p.rows_estimate if p.rows_estimate >= 0 else None,
                    "bytes": p.bytes,
                }
                for p in partitions
            ]
        )
        return
    from rich.table import Table

    table = Table("partition", "from", "to", "rows (estimate)", "size")
    for p in partitions:
        table.add_row(
            p.name,
            p.start.date().isoformat() if p.start else "default",
            p.end.date().isoformat() if p.end else "-",
            str(p.rows_estimate) if p.rows_estimate >= 0 else "not analysed",
            _size(p.bytes),
        )
    console.print(table)


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
