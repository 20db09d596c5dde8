"""Declarative cron: reconcile a file's cron jobs (by name) with the stored ones.

A declared job is the whole desired state: a field the file leaves out takes its default, it
does not keep whatever the stored job had. The plan lists each job as ``create``, ``update``
(with the fields that change), ``unchanged`` or, with ``prune``, ``delete`` for stored jobs the
file no longer declares. Nothing is changed unless every document is valid; with ``dry_run``
nothing is changed at all. Each change leaves an audit row naming who applied it. A job's
paused/active state is not declared: apply keeps it.

At scale (issue 18: 100,000 jobs in one file, under a minute):

* the diff reads only the declared names' rows, a thousand names a query, never every stored
  job of the tenant; a definition is read once per apply, not once per job;
* new jobs are inserted, changed jobs updated and pruned jobs deleted a thousand per
  transaction (each job still guarded by the version the diff read), and the executions the
  deleted jobs had materialised are cancelled in one pass, not one per job;
* a ``label`` names the file (or owner) an apply speaks for: its jobs carry it, and ``prune``
  deletes only jobs with the same label (none: jobs without one), so several files coexist;
* an ``apply_key`` (the HTTP ``Idempotency-Key``) makes a retry safe: the first apply's result
  is recorded, and a retry gets that result back (``replayed: true``) instead of applying again
  and planning against what the first one already did. A retry that arrives while the first is
  still applying waits for it (up to ``wait`` seconds, then 409 ``apply_in_progress``).
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import time
import uuid
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Protocol, cast

from tickwheel.client.cron_wire import Wire, spec_from_wire, spec_to_wire
from tickwheel.cron.pause import cancel_materialised, cancel_materialised_many
from tickwheel.domain.clock import Clock
from tickwheel.domain.cron_jobs import (
    AuditAction,
    AuditEntry,
    CronJob,
    CronJobSpec,
    CronJobStatus,
)
from tickwheel.domain.errors import Conflict, FieldError, InvalidInput
from tickwheel.domain.ids import uuid7
from tickwheel.store.cron_protocol import CronStore
from tickwheel.store.protocol import Store

MAX_DECLARED = 100_000
CHUNK = 1000
"""Names per read and jobs per insert transaction."""
SWEEP_EACH = 20
"""Up to this many pruned jobs, each one's materialised executions are looked up on its own
(one query each); beyond it, one pass pages through all the tenant's unstarted cron
executions, which for a few jobs among 50,000 would read far more than it cancels."""
STALE = timedelta(minutes=10)
"""A first try with no result after this long died: a retry takes its key over."""
MAX_LABEL = 200

Plan = list[tuple[str, CronJobSpec | None, CronJob | None, list[str]]]


class CronJobs(Protocol):
    """What an apply needs of the cron API's rules. ``cron.jobs.CronJobs`` hands itself in;
    naming the need here keeps this module from importing that one (which imports this)."""

    cron: CronStore
    store: Store
    tenant: str
    actor: str
    clock: Clock

    async def check_target(self, spec: CronJobSpec, path: str = "") -> None: ...

    def first_run(self, spec: CronJobSpec, now: datetime) -> datetime | None: ...

    async def create(self, spec: CronJobSpec) -> tuple[Wire, bool]: ...

    def changed(self, job: CronJob, spec: CronJobSpec, now: datetime) -> CronJob: ...

    def audit(
        self, job: CronJob, action: AuditAction, before: CronJob | None, now: datetime
    ) -> AuditEntry: ...


async def apply_jobs(
    jobs: CronJobs,
    docs: list[Any],
    *,
    prune: bool,
    dry_run: bool,
    label: str | None = None,
    apply_key: str | None = None,
    wait: float = 30.0,
) -> Wire:
    _check_label(label)
    if apply_key is None or dry_run:  # a dry run changes nothing: safe to repeat as it is
        return await _apply(jobs, docs, prune=prune, dry_run=dry_run, label=label)
    digest = _request_hash(docs, prune, label)
    deadline = time.monotonic() + wait
    while True:
        begun = await jobs.cron.cron_apply_begin(
            jobs.tenant, apply_key, digest, jobs.clock.now(), STALE
        )
        if begun.state == "done" and begun.result is not None:
            return {**begun.result, "replayed": True}
        if begun.state == "mismatch":
            raise Conflict(
                f"idempotency key {apply_key!r} was used for another apply (other jobs, prune "
                "or label); use a new key for a new apply",
                {"applyKey": apply_key},
            )
        if begun.state == "new":
            break
        if time.monotonic() >= deadline:
            raise Conflict(
                f"the apply with idempotency key {apply_key!r} is still running; retry with the "
                "same key to get its result",
                {"applyKey": apply_key, "state": "running"},
            )
        await asyncio.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
    try:
        result = await _apply(jobs, docs, prune=prune, dry_run=False, label=label)
    except BaseException:
        # Nothing recorded: a retry applies again (reconciling is safe to repeat).
        await jobs.cron.cron_apply_abandon(jobs.tenant, apply_key)
        raise
    await jobs.cron.cron_apply_finish(jobs.tenant, apply_key, result)
    return {**result, "replayed": False}


async def _apply(
    jobs: CronJobs, docs: list[Any], *, prune: bool, dry_run: bool, label: str | None
) -> Wire:
    declared = await _read(jobs, docs)
    names = [spec.name for spec in declared]
    stored: dict[str, CronJob] = {}
    for start in range(0, len(names), CHUNK):
        found = await jobs.cron.cron_job_get_by_names(jobs.tenant, names[start : start + CHUNK])
        stored.update({job.name: job for job in found})
    plan: Plan = []
    for spec in declared:
        current = stored.get(spec.name)
        if current is None:
            plan.append(("create", spec, None, []))
        elif current.spec != spec or current.label != label:
            changes = _changes(current.spec, spec)
            changes += ["label"] if current.label != label else []
            plan.append(("update", spec, current, changes))
        else:
            plan.append(("unchanged", spec, current, []))
    if prune:
        doomed = await jobs.cron.cron_job_prunable(jobs.tenant, label, names)
        plan += [("delete", None, job, []) for job in doomed]
    created: dict[str, str] = {}
    if not dry_run:
        created = await _create_all(jobs, plan, label)
        lost = await _update_all(jobs, plan, label) + await _delete_all(jobs, plan)
        if lost:
            raise _changed_meanwhile(lost)
    items: list[Wire] = []
    for action, wanted, current, changes in plan:
        name = wanted.name if wanted else current.name if current else ""
        items.append(
            {
                "action": action,
                "name": name,
                "cronJobId": str(current.cron_job_id) if current else created.get(name),
                "changes": changes,
            }
        )
    summary = {
        key: sum(1 for i in items if i["action"] == key)
        for key in ("create", "update", "delete", "unchanged")
    }
    return {"dryRun": dry_run, "prune": prune, "label": label, "plan": items, "summary": summary}


async def _create_all(jobs: CronJobs, plan: Plan, label: str | None) -> dict[str, str]:
    """The new jobs, a thousand per transaction; the id of each by name. A name taken since
    the diff (a concurrent apply or create) goes through ``create``, which returns the job
    if it is the same and refuses (409) if it differs."""
    specs = [spec for action, spec, _, _ in plan if action == "create" and spec is not None]
    ids: dict[str, str] = {}
    for start in range(0, len(specs), CHUNK):
        now = jobs.clock.now()
        batch = [
            CronJob(
                cron_job_id=uuid7(now),
                tenant=jobs.tenant,
                spec=spec,
                status=CronJobStatus.ACTIVE,
                next_run_at=jobs.first_run(spec, now),
                version=1,
                created_at=now,
                updated_at=now,
                label=label,
            )
            for spec in specs[start : start + CHUNK]
        ]
        audits = [_created(jobs, job, now) for job in batch]
        inserted = await jobs.cron.cron_job_insert_many(batch, audits)
        for job in batch:
            if job.cron_job_id in inserted:
                ids[job.name] = str(job.cron_job_id)
            else:
                wire, _ = await jobs.create(job.spec)
                ids[job.name] = str(wire["cronJobId"])
    return ids


async def _update_all(jobs: CronJobs, plan: Plan, label: str | None) -> list[str]:
    """The changed jobs, a thousand per transaction, each guarded by the version the diff
    read; the names of those changed by someone else meanwhile (left as they are)."""
    wanted = [
        (replace(current, label=label), spec)
        for action, spec, current, _ in plan
        if action == "update" and spec is not None and current is not None
    ]
    lost: list[str] = []
    for start in range(0, len(wanted), CHUNK):
        now = jobs.clock.now()
        batch = [(job, jobs.changed(job, spec, now)) for job, spec in wanted[start : start + CHUNK]]
        changes = [(new, old.version) for old, new in batch]
        audits = [jobs.audit(new, AuditAction.UPDATED, old, now) for old, new in batch]
        written = await jobs.cron.cron_job_update_many(changes, audits)
        lost += [new.name for _, new in batch if new.cron_job_id not in written]
    return lost


async def _delete_all(jobs: CronJobs, plan: Plan) -> list[str]:
    """The pruned jobs, a thousand per transaction, each guarded by the version the diff read;
    then what they had materialised and not started is cancelled (in one pass for many).
    Returns the names of those changed by someone else meanwhile (left as they are)."""
    doomed = [current for action, _, current, _ in plan if action == "delete" and current]
    lost: list[str] = []
    deleted: set[uuid.UUID] = set()
    for start in range(0, len(doomed), CHUNK):
        now = jobs.clock.now()
        batch = doomed[start : start + CHUNK]
        audits = [jobs.audit(job, AuditAction.DELETED, job, now) for job in batch]
        pairs = [(job.cron_job_id, job.version) for job in batch]
        gone = await jobs.cron.cron_job_delete_many(jobs.tenant, pairs, audits)
        deleted |= gone
        lost += [job.name for job in batch if job.cron_job_id not in gone]
    # What they had materialised and not started would otherwise run for up to a lead more.
    now = jobs.clock.now()
    if len(deleted) <= SWEEP_EACH:
        for job in (job for job in doomed if job.cron_job_id in deleted):
            await cancel_materialised(jobs.cron, jobs.store, job, now, record=False)
    else:
        await cancel_materialised_many(jobs.store, jobs.tenant, deleted, now)
    return lost


def _changed_meanwhile(names: list[str]) -> Conflict:
    shown = ", ".join(repr(n) for n in names[:10])
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return Conflict(
        f"{len(names)} cron job(s) changed while this apply ran ({shown}{more}) and were left "
        "as they are; the rest was applied: apply the file again to reconcile them",
        {"changedMeanwhile": names[:100]},
    )


def _created(jobs: CronJobs, job: CronJob, now: Any) -> AuditEntry:
    after = {**spec_to_wire(job.spec), "status": str(job.status), "version": job.version}
    return AuditEntry(
        tenant=jobs.tenant,
        cron_job_id=job.cron_job_id,
        name=job.name,
        action=AuditAction.CREATED,
        actor=jobs.actor,
        at=now,
        before=None,
        after={**after, "label": job.label},
    )


async def _read(jobs: CronJobs, docs: list[Any]) -> list[CronJobSpec]:
    """Every document checked before anything changes; errors are located as
    ``cronJobs[i].field`` so that the file's author finds them. A target (definition or
    workflow, and version) is looked up once, however many jobs name it."""
    if not isinstance(docs, list) or len(docs) > MAX_DECLARED:
        message = f"must be a list of at most {MAX_DECLARED:,} cron jobs"
        raise InvalidInput(f"cronJobs {message}", [FieldError("cronJobs", message)])
    errors: list[FieldError] = []
    specs: list[CronJobSpec] = []
    seen: dict[str, int] = {}
    checker = copy.copy(jobs)
    checker.store = cast("Store", _Remembered(jobs.store))
    for index, doc in enumerate(docs):
        path = f"cronJobs[{index}]."
        try:
            spec = spec_from_wire(doc)
            await checker.check_target(spec)
        except InvalidInput as exc:
            errors += [FieldError(path + e.path, e.message) for e in exc.errors]
            if len(errors) >= 100:  # enough to fix; a 100,000-line list helps nobody
                break
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
        found = "; ".join(f"{e.path}: {e.message}" for e in errors[:20])
        more = f" (and {len(errors) - 20} more)" if len(errors) > 20 else ""
        raise InvalidInput(f"nothing was applied: {found}{more}", errors)
    return specs


class _Remembered:
    """The store for one apply's target checks: each definition looked up once, however many
    of the declared jobs name it (the inputs are still checked job by job)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._definitions: dict[tuple[Any, ...], Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def definition_get(self, *args: Any) -> Any:
        if args not in self._definitions:
            self._definitions[args] = await self._store.definition_get(*args)
        return self._definitions[args]


def _check_label(label: str | None) -> None:
    if label is None:
        return
    if not label or len(label) > MAX_LABEL or "\x00" in label or label != label.strip():
        message = f"must be 1 to {MAX_LABEL} characters, without NUL or surrounding spaces"
        raise InvalidInput(f"label {message}", [FieldError("label", message)])


def _request_hash(docs: list[Any], prune: bool, label: str | None) -> str:
    text = json.dumps([docs, prune, label], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _changes(old: CronJobSpec, new: CronJobSpec) -> list[str]:
    before, after = spec_to_wire(old), spec_to_wire(new)
    return [key for key in after if before.get(key) != after[key]]
