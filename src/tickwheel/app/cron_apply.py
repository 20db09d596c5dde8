"""The rules of ``cron apply``: reconcile a list of declared cron jobs (by name) with the stored
ones, for one tenant.

A declared job is the whole desired state: a field the list leaves out takes its default, it
does not keep whatever the stored job had. The plan lists each job as ``create``, ``update``
(with the fields that change), ``unchanged`` or, with ``prune``, ``delete`` for stored jobs the
list no longer declares. Nothing is changed unless every document is valid; with ``dry_run``
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
  is recorded, and a retry gets that result back (``replayed``) instead of applying again
  and planning against what the first one already did. A retry that arrives while the first is
  still applying waits for it (up to ``wait`` seconds, then a Conflict, state ``running``).

The single-job rules (target checks, first run, audit entries) are ``CronJobService``'s; the
documents are read by the ``SpecReader`` port (the wire form lives above this layer), and what
pruned jobs had materialised is cancelled through the ``Materialised`` port.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, cast

from tickwheel.app.cron_jobs import CronJobService
from tickwheel.app.outcomes import Outcome
from tickwheel.domain.cron_jobs import AuditAction, AuditEntry, CronJob, CronJobSpec
from tickwheel.domain.errors import Conflict, FieldError, InvalidInput
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

SpecReader = Callable[[Any], CronJobSpec]
"""One declared document as a spec (``InvalidInput`` with field paths when it is not one)."""


class PlanAction(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class PlanStep:
    action: PlanAction
    name: str
    cron_job_id: uuid.UUID | None
    """None only for a create in a dry run."""
    changes: tuple[str, ...] = ()
    """For an update: the spec fields that change (and ``label``)."""


@dataclass(frozen=True)
class Applied:
    """What an apply did (or, in a dry run, would do) to each declared and pruned job."""

    dry_run: bool
    prune: bool
    label: str | None
    plan: tuple[PlanStep, ...]
    replayed: bool | None = None
    """True: the first apply's result under this key, returned again (nothing was applied now);
    False: applied now under a key; None: no key (a dry run, or an apply without one)."""

    @property
    def outcome(self) -> Outcome:
        """``SAME`` for a replayed result, ``CREATED`` for one this call produced."""
        return Outcome.SAME if self.replayed else Outcome.CREATED

    @property
    def summary(self) -> dict[str, int]:
        return {str(a): sum(1 for s in self.plan if s.action is a) for a in PlanAction}

    def record(self) -> dict[str, Any]:
        """The result kept for the apply's key (the store's ``cron_apply_finish``): the shape
        results have been kept in since keys were introduced, so an older one still replays."""
        plan = [
            {"action": str(s.action), "name": s.name, "changes": list(s.changes)}
            | {"cronJobId": str(s.cron_job_id) if s.cron_job_id else None}
            for s in self.plan
        ]
        shape = {"dryRun": self.dry_run, "prune": self.prune, "label": self.label}
        return shape | {"plan": plan, "summary": self.summary}

    @classmethod
    def from_record(cls, record: dict[str, Any], replayed: bool) -> Applied:
        plan = tuple(
            PlanStep(
                PlanAction(p["action"]),
                p["name"],
                uuid.UUID(p["cronJobId"]) if p.get("cronJobId") else None,
                tuple(p.get("changes") or ()),
            )
            for p in record["plan"]
        )
        return cls(record["dryRun"], record["prune"], record.get("label"), plan, replayed)


_Plan = list[tuple[PlanAction, CronJobSpec | None, CronJob | None, list[str]]]


class CronApplyService:
    """``cron apply`` for the tenant, actor and stores of ``jobs``."""

    def __init__(self, jobs: CronJobService, read_spec: SpecReader, *, wait: float = 30.0) -> None:
        self.jobs = jobs
        self.read_spec = read_spec
        self.wait = wait

    async def apply(
        self,
        docs: list[Any],
        *,
        prune: bool,
        dry_run: bool,
        label: str | None = None,
        apply_key: str | None = None,
    ) -> Applied:
        _check_label(label)
        if apply_key is None or dry_run:  # a dry run changes nothing: safe to repeat as it is
            return await self._apply(docs, prune=prune, dry_run=dry_run, label=label)
        jobs = self.jobs
        digest = request_hash(docs, prune, label)
        deadline = time.monotonic() + self.wait
        while True:
            begun = await jobs.cron.cron_apply_begin(
                jobs.tenant, apply_key, digest, jobs.clock.now(), STALE
            )
            if begun.state == "done" and begun.result is not None:
                return Applied.from_record(begun.result, replayed=True)
            if begun.state == "mismatch":
                raise Conflict(
                    f"idempotency key {apply_key!r} was used for another apply (other jobs, "
                    "prune or label); use a new key for a new apply",
                    {"applyKey": apply_key},
                )
            if begun.state == "new":
                break
            if time.monotonic() >= deadline:
                raise Conflict(
                    f"the apply with idempotency key {apply_key!r} is still running; retry with "
                    "the same key to get its result",
                    {"applyKey": apply_key, "state": "running"},
                )
            await asyncio.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        try:
            applied = await self._apply(docs, prune=prune, dry_run=False, label=label)
        except BaseException:
            # Nothing recorded: a retry applies again (reconciling is safe to repeat).
            await jobs.cron.cron_apply_abandon(jobs.tenant, apply_key)
            raise
        await jobs.cron.cron_apply_finish(jobs.tenant, apply_key, applied.record())
        return replace(applied, replayed=False)

    async def _apply(
        self, docs: list[Any], *, prune: bool, dry_run: bool, label: str | None
    ) -> Applied:
        jobs = self.jobs
        declared = await self._read(docs)
        names = [spec.name for spec in declared]
        stored: dict[str, CronJob] = {}
        for start in range(0, len(names), CHUNK):
            found = await jobs.cron.cron_job_get_by_names(jobs.tenant, names[start : start + CHUNK])
            stored.update({job.name: job for job in found})
        plan: _Plan = []
        for spec in declared:
            current = stored.get(spec.name)
            if current is None:
                plan.append((PlanAction.CREATE, spec, None, []))
            elif current.spec != spec or current.label != label:
                changes = self._changes(current.spec, spec)
                changes += ["label"] if current.label != label else []
                plan.append((PlanAction.UPDATE, spec, current, changes))
            else:
                plan.append((PlanAction.UNCHANGED, spec, current, []))
        if prune:
            doomed = await jobs.cron.cron_job_prunable(jobs.tenant, label, names)
            plan += [(PlanAction.DELETE, None, job, []) for job in doomed]
        created: dict[str, uuid.UUID] = {}
        if not dry_run:
            created = await self._create_all(plan, label)
            lost = await self._update_all(plan, label) + await self._delete_all(plan)
            if lost:
                raise _changed_meanwhile(lost)
        steps = []
        for action, wanted, current, changes in plan:
            name = wanted.name if wanted else current.name if current else ""
            job_id = current.cron_job_id if current else created.get(name)
            steps.append(PlanStep(action, name, job_id, tuple(changes)))
        return Applied(dry_run, prune, label, tuple(steps))

    async def _create_all(self, plan: _Plan, label: str | None) -> dict[str, uuid.UUID]:
        """The new jobs, a thousand per transaction; the id of each by name. A name taken since
        the diff (a concurrent apply or create) goes through ``create_job``, which returns the
        job if it is the same and refuses (Conflict) if it differs."""
        jobs = self.jobs
        specs = [spec for action, spec, _, _ in plan if action is PlanAction.CREATE and spec]
        ids: dict[str, uuid.UUID] = {}
        for start in range(0, len(specs), CHUNK):
            now = jobs.clock.now()
            batch = [jobs.new_job(spec, now, label) for spec in specs[start : start + CHUNK]]
            audits = [self._created(job, now) for job in batch]
            inserted = await jobs.cron.cron_job_insert_many(batch, audits)
            for job in batch:
                if job.cron_job_id in inserted:
                    ids[job.name] = job.cron_job_id
                else:
                    written = await jobs.create_job(job.spec, checked=True)
                    ids[job.name] = written.value.cron_job_id
        return ids

    async def _update_all(self, plan: _Plan, label: str | None) -> list[str]:
        """The changed jobs, a thousand per transaction, each guarded by the version the diff
        read; the names of those changed by someone else meanwhile (left as they are)."""
        jobs = self.jobs
        wanted = [
            (replace(current, label=label), spec)
            for action, spec, current, _ in plan
            if action is PlanAction.UPDATE and spec is not None and current is not None
        ]
        lost: list[str] = []
        for start in range(0, len(wanted), CHUNK):
            now = jobs.clock.now()
            batch = [
                (job, jobs.changed(job, spec, now)) for job, spec in wanted[start : start + CHUNK]
            ]
            changes = [(new, old.version) for old, new in batch]
            audits = [jobs.audit(new, AuditAction.UPDATED, old, now) for old, new in batch]
            written = await jobs.cron.cron_job_update_many(changes, audits)
            lost += [new.name for _, new in batch if new.cron_job_id not in written]
        return lost

    async def _delete_all(self, plan: _Plan) -> list[str]:
        """The pruned jobs, a thousand per transaction, each guarded by the version the diff
        read; then what they had materialised and not started is cancelled (in one pass for
        many). Returns the names of those changed by someone else meanwhile (left as they
        are)."""
        jobs = self.jobs
        doomed = [
            current for action, _, current, _ in plan if action is PlanAction.DELETE and current
        ]
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
                await jobs.materialised.cancel(job, now, record=False)
        else:
            await jobs.materialised.cancel_many(jobs.tenant, deleted, now)
        return lost

    def _created(self, job: CronJob, now: datetime) -> AuditEntry:
        after = {**self.jobs.spec_document(job.spec), "status": str(job.status)}
        return AuditEntry(
            tenant=self.jobs.tenant,
            cron_job_id=job.cron_job_id,
            name=job.name,
            action=AuditAction.CREATED,
            actor=self.jobs.actor,
            at=now,
            before=None,
            after={**after, "version": job.version, "label": job.label},
        )

    def _changes(self, old: CronJobSpec, new: CronJobSpec) -> list[str]:
        before, after = self.jobs.spec_document(old), self.jobs.spec_document(new)
        return [key for key in after if before.get(key) != after[key]]

    async def _read(self, docs: list[Any]) -> list[CronJobSpec]:
        """Every document checked before anything changes; errors are located as
        ``cronJobs[i].field`` so that the file's author finds them. A target (definition or
        workflow, and version) is looked up once, however many jobs name it."""
        if not isinstance(docs, list) or len(docs) > MAX_DECLARED:
            message = f"must be a list of at most {MAX_DECLARED:,} cron jobs"
            raise InvalidInput(f"cronJobs {message}", [FieldError("cronJobs", message)])
        errors: list[FieldError] = []
        specs: list[CronJobSpec] = []
        seen: dict[str, int] = {}
        checker = copy.copy(self.jobs)
        checker.store = cast("Store", _Remembered(self.jobs.store))
        for index, doc in enumerate(docs):
            path = f"cronJobs[{index}]."
            try:
                spec = self.read_spec(doc)
                await checker.check_target(spec)
            except InvalidInput as exc:
                errors += [FieldError(path + e.path, e.message) for e in exc.errors]
                if len(errors) >= 100:  # enough to fix; a 100,000-line list helps nobody
                    break
                continue
            if spec.name in seen:
                also = f"also cronJobs[{seen[spec.name]}]"
                errors.append(
                    FieldError(path + "name", f"{spec.name!r} is declared twice ({also})")
                )
            seen[spec.name] = index
            specs.append(spec)
        if errors:
            found = "; ".join(f"{e.path}: {e.message}" for e in errors[:20])
            more = f" (and {len(errors) - 20} more)" if len(errors) > 20 else ""
            raise InvalidInput(f"nothing was applied: {found}{more}", errors)
        return specs


def _changed_meanwhile(names: list[str]) -> Conflict:
    shown = ", ".join(repr(n) for n in names[:10])
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return Conflict(
        f"{len(names)} cron job(s) changed while this apply ran ({shown}{more}) and were left "
        "as they are; the rest was applied: apply the file again to reconcile them",
        {"changedMeanwhile": names[:100]},
    )


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


def request_hash(docs: list[Any], prune: bool, label: str | None) -> str:
    """What a key's first apply asked for: a retry must ask for the same."""
    text = json.dumps([docs, prune, label], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
