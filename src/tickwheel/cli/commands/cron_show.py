"""How ``tickwheel cron`` prints cron jobs, fire times, histories and plans (Rich tables)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.table import Table

from tickwheel.cli.context import console, print_json
from tickwheel.domain.definition_refs import short

if TYPE_CHECKING:  # the cron client (yaml, the cron domain) is loaded by the command that runs
    from tickwheel.client.cron import ApplyResult, CronJobInfo, FireTime, OccurrenceInfo

_OUTCOME_STYLE = {
    "SUBMITTED": "green",
    "SKIPPED_OVERLAP": "yellow",
    "SKIPPED_MISFIRE": "yellow",
    "COALESCED": "yellow",
    "SKIPPED_PAUSED": "dim",
    "SKIPPED_DST": "magenta",
    "REPLACED": "dim",
    "FAILED": "red",
}
_PLAN_STYLE = {"create": "green", "update": "yellow", "delete": "red", "unchanged": "dim"}


def _z(value: Any) -> str:
    return "-" if value is None else str(value)


def show_job(job: CronJobInfo, as_json: bool) -> None:
    if as_json:
        print_json(job.to_wire())
        return
    w = job.wire
    table = Table(show_header=False, box=None)
    for label, value in (
        ("cron job", f"{job.name}  ({job.cron_job_id})"),
        ("status", job.status),
        (job.target, target_of(job)),
        ("inputs", json.dumps(w["inputs"])),
        ("schedule", f"{job.expression}  in {job.timezone}"),
        ("dst policy", ", ".join(f"{k}: {v}" for k, v in w["dstPolicy"].items())),
        ("misfire", f"{w['misfirePolicy']} (max catch-up {w['maxCatchUp']})"),
        ("overlap", w["overlapPolicy"]),
        ("jitter", f"{w['jitter']} s"),
        ("window", f"{_z(w['startAt'])} .. {_z(w['endAt'])}"),
        ("next run", _z(w["nextRunAt"])),
        ("last occurrence", f"{_z(w['lastOccurrence'])}  {_last_run(w)}"),
        ("version", str(job.version)),
    ):
        table.add_row(f"[bold]{label}[/]", value)
    console.print(table)
    if job.next_fire_times:
        console.print("[bold]next fire times[/]")
        show_fire_times(job.next_fire_times, False)


def target_of(job: CronJobInfo) -> str:
    """What each occurrence starts, with the version (``latest`` unless pinned)."""
    if job.target == "workflow":
        return f"{job.workflow} ({_z(job.workflow_version or 'latest')})"
    version = job.definition_version if job.definition_version is not None else "latest"
    return f"{job.definition_uri} ({version})"


def _last_run(w: dict[str, Any]) -> str:
    if w.get("lastWorkflowRunId"):
        return f"workflow run {w['lastWorkflowRunId']}"
    return f"execution {_z(w['lastExecutionId'])}"


def show_fire_times(times: list[FireTime], as_json: bool) -> None:
    if as_json:
        print_json(
            [
                {
                    "at": t.at.isoformat(),
                    "local": t.local.isoformat(),
                    "zone": t.zone,
                    "fires": t.fires,
                    "dst": t.dst,
                    "reason": t.reason,
                }
                for t in times
            ]
        )
        return
    table = Table("UTC", "local", "zone", "DST", "why")
    for t in times:
        at = t.at.strftime("%Y-%m-%d %H:%M:%SZ")
        local = t.local.strftime("%a %Y-%m-%d %H:%M:%S%z")
        if not t.fires:
            at, local = f"[dim]({at})[/]", f"[dim]({local}) not fired[/]"
        table.add_row(at, local, _z(t.zone), _z(t.dst), t.reason or "")
    console.print(table)


def show_jobs(items: list[CronJobInfo], next_cursor: str | None, as_json: bool) -> None:
    if as_json:
        print_json({"items": [j.to_wire() for j in items], "nextCursor": next_cursor})
        return
    table = Table("name", "status", "schedule", "zone", "target", "next run (UTC)")
    for j in items:
        if j.target == "workflow":
            target = f"workflow {j.workflow}"
        else:
            target = f"definition {short(j.definition_uri or '')}"
        table.add_row(
            j.name,
            j.status,
            j.expression,
            j.timezone,
            target,
            j.next_run_at.strftime("%Y-%m-%d %H:%M:%SZ") if j.next_run_at else "-",
        )
    console.print(table)
    if next_cursor:
        console.print(f"more: --cursor {next_cursor}")


def show_history(items: list[OccurrenceInfo], next_cursor: str | None, as_json: bool) -> None:
    if as_json:
        rows = [
            {
                "occurrence": o.occurrence.isoformat(),
                "outcome": o.outcome,
                "executionId": str(o.execution_id) if o.execution_id else None,
                "executionStatus": o.execution_status,
                "workflowRunId": str(o.workflow_run_id) if o.workflow_run_id else None,
                "workflowRunStatus": o.workflow_run_status,
                "executeAt": o.execute_at.isoformat() if o.execute_at else None,
                "reason": o.reason,
            }
            for o in items
        ]
        print_json({"items": rows, "nextCursor": next_cursor})
        return
    table = Table("occurrence (UTC)", "outcome", "execution / workflow run", "status", "reason")
    for o in items:
        style = _OUTCOME_STYLE.get(o.outcome, "white")
        run = f"run {o.workflow_run_id}" if o.workflow_run_id else _z(o.execution_id)
        table.add_row(
            o.occurrence.strftime("%Y-%m-%d %H:%M:%SZ"),
            f"[{style}]{o.outcome}[/]",
            run,
            _z(o.workflow_run_status if o.workflow_run_id else o.execution_status),
            o.reason or "",
        )
    console.print(table)
    if next_cursor:
        console.print(f"more: --cursor {next_cursor}")


def show_plan(result: ApplyResult, as_json: bool) -> None:
    if as_json:
        print_json(result.to_wire())
        return
    table = Table("action", "cron job", "changes")
    for item in result.plan:
        style = _PLAN_STYLE.get(item.action, "white")
        table.add_row(f"[{style}]{item.action}[/]", item.name, ", ".join(item.changes))
    console.print(table)
    summary = ", ".join(f"{n} to {k}" for k, n in result.summary.model_dump().items() if n)
    verb = "would apply" if result.dry_run else "applied"
    if result.replayed:  # the first try's plan, fetched again by a retry
        verb = "applied (by an earlier try of this apply; its plan is shown)"
    console.print(f"{verb}: {summary or 'nothing to do'}")
