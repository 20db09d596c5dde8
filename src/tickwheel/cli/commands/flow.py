"""definitions pause | resume | flow, and tenant pause | resume | show | rate-limit |
clear-rate-limit (docs/flow-control.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.table import Table

from tickwheel.cli.context import JsonFlag, console, explain, print_json, state

if TYPE_CHECKING:
    # The SDK's flow client and its models are imported by the command that runs.
    from tickwheel.client.flow import FlowSync
    from tickwheel.resources.flow import DefinitionFlowState, Pause, RateLimit, TenantFlowState

T = TypeVar("T")
tenant_app = typer.Typer(
    help="Pause, resume or rate-limit your whole tenant.", no_args_is_help=True
)

Reason = Annotated[str, typer.Option("--reason", help="shown with the pause")]
OtherTenant = Annotated[
    str | None, typer.Option("--tenant", help="another tenant (operator key only)")
]


def _on_flow(
    ctx: typer.Context,
    as_json: bool,
    call: Callable[[FlowSync], T],
    show: Callable[[T, bool], None],
) -> None:
    """Runs one call of the SDK's flow client and shows its answer; an error is explained."""
    cli = state(ctx, as_json)
    with cli.client() as client:
        try:
            show(call(client.flow), cli.as_json)
        except Exception as exc:
            raise explain(exc) from exc


def _pause_line(p: Pause) -> str:
    what = p.definition or "the whole tenant"
    probe = f", probe {p.probe_execution_id}" if p.probe_execution_id else ""
    why = f": {p.reason}" if p.reason else ""
    return f"  {p.kind} pause of {what} since {p.paused_at:%Y-%m-%d %H:%M:%S}Z{why}{probe}"


def _rate_line(r: RateLimit) -> str:
    what = r.definition or "the whole tenant"
    source = f" (rateLimit of version {r.definition_version})" if r.definition_version else ""
    return (
        f"  rate limit of {what}: {r.limit} per {r.period:g}s, burst {r.burst}; "
        f"{r.tokens:g} tokens now, {max(0.0, r.burst - r.tokens):g} used{source}"
    )


def _show_definition(f: DefinitionFlowState, as_json: bool) -> None:
    if as_json:
        print_json(f.to_wire())
        return
    word = "[yellow]paused[/]" if f.paused else "[green]running[/]"
    console.print(f"{f.definition}: {word}")
    for p in f.pauses:
        console.print(_pause_line(p))
    for r in f.rate_limits:
        console.print(_rate_line(r))
    b = f.circuit_breaker
    if b is not None:
        until = f", cool-down until {b.cool_down_until:%H:%M:%S}Z" if b.cool_down_until else ""
        console.print(
            f"circuit breaker: {b.state} ({b.consecutive_failures} failures in a row{until})"
        )
    if f.transitions:
        table = Table("at", "from", "to", "reason")
        for t in f.transitions:
            table.add_row(f"{t.at:%Y-%m-%d %H:%M:%S}Z", t.from_state, t.to_state, t.reason)
        console.print(table)


def _show_tenant(f: TenantFlowState, as_json: bool) -> None:
    if as_json:
        print_json(f.to_wire())
        return
    word = "[yellow]paused[/]" if f.paused else "[green]running[/]"
    weight = f", weight {f.weight} in the fair claim" if f.weight != 1 else ""
    console.print(f"tenant {f.tenant}: {word}{weight}")
    for p in f.pauses:
        console.print(_pause_line(p))
    for b in f.circuit_breakers:
        console.print(f"  circuit breaker of {b.definition}: {b.state}")
    for r in f.rate_limits:
        console.print(_rate_line(r))


def pause(ctx: typer.Context, name: str, reason: Reason = "", as_json: JsonFlag = False) -> None:
    """Pause a definition: nothing new of it starts until resumed; running attempts finish;
    due executions wait READY."""
    _on_flow(ctx, as_json, lambda flow: flow.pause(name, reason), _show_definition)


def resume(ctx: typer.Context, name: str, as_json: JsonFlag = False) -> None:
    """Resume a paused definition; what it held back starts at once."""
    _on_flow(ctx, as_json, lambda flow: flow.resume(name), _show_definition)


def flow(ctx: typer.Context, name: str, as_json: JsonFlag = False) -> None:
    """A definition's pauses, circuit breaker and its transitions."""
    _on_flow(ctx, as_json, lambda flow: flow.state(name), _show_definition)


def register(definitions_app: typer.Typer) -> None:
    for command in (pause, resume, flow):
        definitions_app.command()(command)


@tenant_app.command("pause")
def tenant_pause(
    ctx: typer.Context, reason: Reason = "", tenant: OtherTenant = None, as_json: JsonFlag = False
) -> None:
    """Pause the whole tenant: nothing new of it starts until resumed (admin key)."""
    _on_flow(ctx, as_json, lambda flow: flow.pause_tenant(reason, tenant), _show_tenant)


@tenant_app.command("resume")
def tenant_resume(
    ctx: typer.Context, tenant: OtherTenant = None, as_json: JsonFlag = False
) -> None:
    """Resume the whole tenant."""
    _on_flow(ctx, as_json, lambda flow: flow.resume_tenant(tenant), _show_tenant)


@tenant_app.command("show")
def tenant_show(ctx: typer.Context, tenant: OtherTenant = None, as_json: JsonFlag = False) -> None:
    """The tenant's pauses and its definitions' circuit breakers."""
    _on_flow(ctx, as_json, lambda flow: flow.tenant_state(tenant), _show_tenant)


def _period(text: str) -> float | str:
    """``2`` or ``0.5`` as seconds; ``1s``, ``500ms``, ``1m`` as written (the API reads them)."""
    try:
        return float(text)
    except ValueError:
        return text


@tenant_app.command("rate-limit")
def tenant_rate_limit(
    ctx: typer.Context,
    limit: Annotated[int, typer.Argument(help="starts per period")],
    period: Annotated[str, typer.Option(help='seconds, or "1s", "500ms", "1m", "1h"')] = "1s",
    burst: Annotated[
        int | None, typer.Option(help="starts at once after a quiet spell (default: limit)")
    ] = None,
    tenant: OtherTenant = None,
    as_json: JsonFlag = False,
) -> None:
    """At most LIMIT executions of the tenant start per period, whatever their definition
    (admin key); over it they wait READY for tokens."""
    _on_flow(
        ctx,
        as_json,
        lambda flow: flow.limit_tenant_rate(limit, _period(period), burst, tenant),
        _show_tenant,
    )


@tenant_app.command("clear-rate-limit")
def tenant_clear_rate_limit(
    ctx: typer.Context, tenant: OtherTenant = None, as_json: JsonFlag = False
) -> None:
    """Lift the tenant's own rate limit (definitions' rateLimit stay)."""
    _on_flow(ctx, as_json, lambda flow: flow.unlimit_tenant_rate(tenant), _show_tenant)


@tenant_app.command("weight")
def tenant_weight(
    ctx: typer.Context,
    weight: Annotated[int, typer.Argument(help="executions per turn in the fair claim, 1 to 100")],
    tenant: OtherTenant = None,
    as_json: JsonFlag = False,
) -> None:
    """Set the tenant's share of each claim while several tenants have READY work (operator
    key; 1 is the default)."""
    _on_flow(ctx, as_json, lambda flow: flow.weigh_tenant(weight, tenant), _show_tenant)
