"""``tickwheel prune``: run-history retention by hand, for operators.

The engine's pruner does the same every hour with ``TICKWHEEL_RETENTION_DAYS``; this command is
for a first clean-up, a one-off shorter retention, or a deployment that turned the pruner off.
It works on the database directly, like ``db upgrade``, and needs no API key."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from tickwheel.cli.commands.admin import DatabaseUrl, with_store
from tickwheel.cli.context import console, fail
from tickwheel.domain.retention import PRUNE_BATCH

if TYPE_CHECKING:
    from tickwheel.store.protocol import Store

_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


def parse_age(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``2w``, ``45s`` -> a positive duration."""
    match = _AGE.match(text.lower())
    if match is None:
        raise ValueError(f"{text!r} is not an age like 30d, 12h, 90m, 2w or 45s")
    age = timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
    if age <= timedelta(0):
        raise ValueError(f"the age must be more than zero, not {text!r}")
    return age


def prune_command(
    older_than: Annotated[
        str, typer.Option("--older-than", help="finished longer ago than this: 30d, 12h, 2w")
    ] = "30d",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="only count what would be deleted")
    ] = False,
    batch: Annotated[int, typer.Option(min=1, help="executions deleted per statement")] = (
        PRUNE_BATCH
    ),
    database_url: DatabaseUrl = None,
) -> None:
    """Delete finished executions (SUCCEEDED, FAILED, CANCELLED, EXPIRED) older than an age, with
    their attempts, history and outputs (their idempotency keys become free again), and cron history
    and audit rows as old (a cron job's newest history row is kept)."""
    # The pruner's passes (the engine) and the cron tables' store, loaded to run, not to list.
    from tickwheel.domain.clock import SystemClock
    from tickwheel.engine.pruner import count_prunable, prune, prune_cron
    from tickwheel.store.factory import cron_store_for

    try:
        age = parse_age(older_than)
    except ValueError as exc:
        raise fail(str(exc)) from exc
    cutoff = SystemClock().now() - age
    when = cutoff.isoformat(timespec="seconds")

    async def work(store: Store) -> tuple[int, int]:
        cron = cron_store_for(store)
        if dry_run:
            return await count_prunable(store, cutoff), await cron.cron_history_count_prunable(
                cutoff
            )
        return await prune(store, cutoff, batch), await prune_cron(cron, cutoff, batch)

    n, rows = with_store(database_url, work, create=False)
    if dry_run:
        console.print(f"would delete {n} executions finished before {when} (dry run)")
        console.print(f"would delete {rows} cron history and audit rows from before {when}")
    else:
        console.print(f"deleted {n} executions finished before {when}")
        console.print(f"deleted {rows} cron history and audit rows from before {when}")
