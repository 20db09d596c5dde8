"""webhooks add | list | remove | deliveries: a tenant's failure notifications."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from tickwheel.cli.context import JsonFlag, console, explain, print_json, state
from tickwheel.domain.webhook_events import WebhookEvent

app = typer.Typer(
    help="Webhooks that tell you when executions dead-letter, cron occurrences are missed or"
    " fail, and workflow runs fail (docs/webhooks.md).",
    no_args_is_help=True,
)
EVENTS = ", ".join(e.value for e in WebhookEvent)


@app.command()
def add(
    ctx: typer.Context,
    url: str,
    events: Annotated[list[str], typer.Option("--event", "-e", help=f"repeatable: {EVENTS}")] = [],  # noqa: B006 - typer reads, never mutates
    description: Annotated[str, typer.Option()] = "",
    as_json: JsonFlag = False,
) -> None:
    """Subscribe URL to events (all of them without --event). Prints the signing secret: it is
    shown only now."""
    cli = state(ctx, as_json)
    with cli.client() as client:
        try:
            made = client.webhooks.add(url, events or [e.value for e in WebhookEvent], description)
        except Exception as exc:
            raise explain(exc) from exc
    if cli.as_json:
        print_json(made.to_wire())
        return
    console.print(f"[green]added[/] webhook {made.webhook_id} -> {made.url}")
    console.print(f"events: {', '.join(made.events)}")
    console.print(f"secret: [bold]{made.secret}[/]  (shown once: keep it to verify signatures)")


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Your tenant's webhooks (secrets masked)."""
    cli = state(ctx, as_json)
    with cli.client() as client:
        try:
            items = client.webhooks.list()
        except Exception as exc:
            raise explain(exc) from exc
    if cli.as_json:
        print_json([w.to_wire() for w in items])
        return
    table = Table("webhookId", "url", "events", "secret", "description")
    for w in items:
        table.add_row(str(w.webhook_id), w.url, ", ".join(w.events), w.secret, w.description)
    console.print(table)


@app.command()
def remove(ctx: typer.Context, webhook_id: str, as_json: JsonFlag = False) -> None:
    """Remove a webhook and its deliveries (pending ones are never sent)."""
    cli = state(ctx, as_json)
    with cli.client() as client:
        try:
            gone = client.webhooks.remove(webhook_id)
        except Exception as exc:
            raise explain(exc) from exc
    if cli.as_json:
        print_json(gone.to_wire())
        return
    console.print(f"[green]removed[/] webhook {gone.webhook_id} ({gone.url})")


@app.command()
def deliveries(
    ctx: typer.Context,
    webhook_id: str,
    limit: Annotated[int, typer.Option(min=1, max=500)] = 50,
    as_json: JsonFlag = False,
) -> None:
    """The newest deliveries of a webhook: status, tries, last answer, next try."""
    cli = state(ctx, as_json)
    with cli.client() as client:
        try:
            items = client.webhooks.deliveries(webhook_id, limit)
        except Exception as exc:
            raise explain(exc) from exc
    if cli.as_json:
        print_json([d.to_wire() for d in items])
        return
    from tickwheel.domain.clock import iso

    table = Table("deliveryId", "event", "status", "tries", "code", "next try", "last error")
    for d in items:
        table.add_row(
            str(d.delivery_id),
            d.event,
            d.status,
            str(d.attempts),
            "" if d.response_code is None else str(d.response_code),
            iso(d.next_attempt_at) if d.status == "PENDING" else "",
            d.last_error or "",
        )
    console.print(table)
