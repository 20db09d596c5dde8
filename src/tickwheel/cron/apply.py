"""Declarative cron: reconcile a file's cron jobs (by name) with the stored ones.

A declared job is the whole desired state: a field the file leaves out takes its default, it
does not keep whatever the stored job had. The plan lists each job as ``create``, ``update``
(with the fields that change), ``unchanged`` or, with ``prune``, ``delete`` for stored jobs the
file no longer declares. Nothing is changed unless every document is valid; with ``dry_run``
nothing is changed at all. Each change goes through the same guarded writes as the API and
leaves an audit row naming who applied it. A job's paused/active state is not declared: apply
keeps it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tickwheel.client.cron_wire import Wire, spec_from_wire, spec_to_wire
from tickwheel.domain.cron_jobs import CronJob, CronJobSpec
from tickwheel.domain.errors import FieldError, InvalidInput

if TYPE_CHECKING:
    from tickwheel.cron.jobs import CronJobs

MAX_DECLARED = 1000


async def apply_jobs(jobs: CronJobs, docs: list[Any], *, prune: bool, dry_run: bool) -> Wire:
    declared = await _read(jobs, docs)
    stored = await _all(jobs)
    plan: list[tuple[str, CronJobSpec | None, CronJob | None, list[str]]] = []
    for spec in declared:
        current = stored.get(spec.name)
        if current is None:
            plan.append(("create", spec, None, []))
        elif current.spec != spec:
            plan.append(("update", spec, current, _changes(current.spec, spec)))
        else:
            plan.append(("unchanged", spec, current, []))
    if prune:
        names = {spec.name for spec in declared}
        plan += [
            ("delete", None, job, []) for name, job in sorted(stored.items()) if name not in names
        ]
    items: list[Wire] = []
    for action, wanted, current, changes in plan:
        item: Wire = {
            "action": action,
            "name": wanted.name if wanted else current.name if current else "",
            "cronJobId": str(current.cron_job_id) if current else None,
            "changes": changes,
        }
        if not dry_run:
            item["cronJobId"] = await _carry_out(jobs, action, wanted, current) or item["cronJobId"]
        items.append(item)
    summary = {
        key: sum(1 for i in items if i["action"] == key)
        for key in ("create", "update", "delete", "unchanged")
    }
    return {"dryRun": dry_run, "prune": prune, "plan": items, "summary": summary}


async def _read(jobs: CronJobs, docs: list[Any]) -> list[CronJobSpec]:
    """Every document checked before anything changes; errors are located as
    ``cronJobs[i].field`` so that the file's author finds them."""
    if not isinstance(docs, list) or len(docs) > MAX_DECLARED:
        message = f"must be a list of at most {MAX_DECLARED} cron jobs"
        raise InvalidInput(f"cronJobs {message}", [FieldError("cronJobs", message)])
    errors: list[FieldError] = []
    specs: list[CronJobSpec] = []
    seen: dict[str, int] = {}
    for index, doc in enumerate(docs):
        path = f"cronJobs[{index}]."
        try:
            spec = spec_from_wire(doc)
            await jobs.check_target(spec)
        except InvalidInput as exc:
            errors += [FieldError(path + e.path, e.message) for e in exc.errors]
            continue
        if spec.name in seen:
            errors.append(
                FieldError(
                    path + "name",
                    f"{spec.name!r} is declared twice (also cronJobs[{seen[spec.name]}])",
                )
            )
        seen[spec.name] = index
        specs.append(spec)
    if errors:
        found = "; ".join(f"{e.path}: {e.message}" for e in errors)
        raise InvalidInput(f"nothing was applied: {found}", errors)
    return specs


async def _all(jobs: CronJobs) -> dict[str, CronJob]:
    found: dict[str, CronJob] = {}
    after: str | None = None
    while True:
        page = await jobs.cron.cron_job_list(jobs.tenant, after, 500)
        found.update({job.name: job for job in page})
        if len(page) < 500:
            return found
        after = page[-1].name


def _changes(old: CronJobSpec, new: CronJobSpec) -> list[str]:
    before, after = spec_to_wire(old), spec_to_wire(new)
    return [key for key in after if before.get(key) != after[key]]


async def _carry_out(
    jobs: CronJobs, action: str, spec: CronJobSpec | None, current: CronJob | None
) -> str | None:
    if action == "create" and spec is not None:
        wire, _ = await jobs.create(spec)
        return str(wire["cronJobId"])
    if action == "update" and spec is not None and current is not None:
        return str((await jobs.update(current, spec)).cron_job_id)
    if action == "delete" and current is not None:
        await jobs.cron_delete(str(current.cron_job_id), current.version)
    return None
