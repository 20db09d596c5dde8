"""The cron job rules for one tenant: find, create, change, pause, resume, delete.

* A job targets a Job Definition or a Workflow, exactly one. No version means *latest*,
  resolved again at every occurrence; a number pins it. Either way the target must exist and
  accept the job's inputs when the job is created or its target changes (``cron_checks.py``),
  so that a mistake is refused now rather than a FAILED occurrence at 02:00.
* Every change is guarded by the job's ``version``: a change or delete that names an older one
  is a Conflict, and so is a change made by someone else between reading and writing here.
* Creating a job whose name exists with the same spec is ``SAME`` (a retried create is
  harmless); with another spec it is a Conflict.
* Each change writes an audit entry beside it, in the same transaction (the store's).

What the Cron Service does with the executions it already materialised (cancel them on a
pause or delete, record the occurrences a resume skips) comes in through the ``Materialised``
port, and the audit trail's spec documents through ``SpecDocument``: both speak the Cron
Service's and the wire's terms, which this layer does not import (``cron/jobs.py`` passes them).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from tickwheel.app.cron_checks import check_definition, check_workflow
from tickwheel.app.outcomes import Outcome, Written
from tickwheel.domain.clock import Clock, SystemClock
from tickwheel.domain.cron_jobs import (
    AuditAction,
    AuditEntry,
    CronJob,
    CronJobSpec,
    CronJobStatus,
    OccurrenceRecord,
)
from tickwheel.domain.cron_schedule import TINY, Schedule
from tickwheel.domain.errors import Conflict, NotFound
from tickwheel.domain.ids import uuid7
from tickwheel.store.cron_protocol import CronStore
from tickwheel.store.protocol import Store
from tickwheel.store.workflow_protocol import WorkflowStore

SpecDocument = Callable[[CronJobSpec], dict[str, Any]]
"""A spec as the document the audit trail keeps of it (before and after a change)."""


class Materialised(Protocol):
    """The occurrences the Cron Service already turned into executions (``cron/pause.py``)."""

    async def cancel(
        self, job: CronJob, now: datetime, *, record: bool = True
    ) -> list[OccurrenceRecord]:
        """Cancels the job's executions not yet started (recording each when ``record``)."""
        ...

    async def cancel_many(self, tenant: str, cron_job_ids: set[uuid.UUID], now: datetime) -> int:
        """``cancel`` for many deleted jobs at once (``cron apply --prune``), recording
        nothing; how many were cancelled."""
        ...

    def missed_while_paused(self, job: CronJob, now: datetime) -> list[OccurrenceRecord]:
        """A resume without catch-up: the occurrences missed while paused, SKIPPED_PAUSED."""
        ...


class CronJobService:
    def __init__(
        self,
        cron: CronStore,
        store: Store,
        tenant: str,
        actor: str,
        *,
        spec_document: SpecDocument,
        materialised: Materialised,
        workflows: WorkflowStore | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.cron = cron
        self.store = store
        self.tenant = tenant
        self.actor = actor
        self.clock = clock or SystemClock()
        self.spec_document = spec_document
        self.materialised = materialised
        self._workflows = workflows

    @property
    def workflows(self) -> WorkflowStore:
        """The workflow registry and runs, for jobs that target a workflow (``cron/jobs.py``
        finds the one beside ``store`` when its caller passes none)."""
        if self._workflows is None:
            raise RuntimeError("this cron job service was built without the workflow store")
        return self._workflows

    # -- reading --------------------------------------------------------------------------------

    async def find(self, ref: str | uuid.UUID) -> CronJob:
        """By id or by name, in this tenant only (another tenant's job is simply not found)."""
        if isinstance(ref, uuid.UUID):
            job = await self.cron.cron_job_get(self.tenant, ref)
        else:
            job = await self.cron.cron_job_get_by_name(self.tenant, ref)
        if job is None:
            raise NotFound(f"no cron job {ref}")
        return job

    # -- the parts a batch (``cron apply``) shares ----------------------------------------------

    async def check_target(self, spec: CronJobSpec, path: str = "") -> None:
        """The target exists and accepts the inputs, else ``InvalidInput``."""
        if spec.workflow_name is not None:
            await check_workflow(self.workflows, self.tenant, spec, path)
        else:
            await check_definition(self.store, self.tenant, spec, path)

    def first_run(self, spec: CronJobSpec, now: datetime) -> datetime | None:
        return Schedule(spec).next_fire(now)[0]

    def new_job(self, spec: CronJobSpec, now: datetime, label: str | None = None) -> CronJob:
        """The job a create stores: active, version 1, due at its first fire time."""
        return CronJob(
            cron_job_id=uuid7(now),
            tenant=self.tenant,
            spec=spec,
            status=CronJobStatus.ACTIVE,
            next_run_at=self.first_run(spec, now),
            version=1,
            created_at=now,
            updated_at=now,
            label=label,
        )

    def audit(
        self, job: CronJob, action: AuditAction, before: CronJob | None, now: datetime
    ) -> AuditEntry:
        return AuditEntry(
            tenant=self.tenant,
            cron_job_id=job.cron_job_id,
            name=job.name,
            action=action,
            actor=self.actor,
            at=now,
            before=self._snapshot(before),
            after=self._snapshot(job) if action is not AuditAction.DELETED else None,
        )

    def changed(self, job: CronJob, spec: CronJobSpec, now: datetime) -> CronJob:
        """The job as ``update`` writes it: a change to when the job fires recomputes its next
        run from now (a change to inputs or policies keeps it)."""
        next_run = job.next_run_at
        if spec.schedule_key() != job.spec.schedule_key():
            next_run = self.first_run(spec, now)
        return replace(
            job, spec=spec, next_run_at=next_run, version=job.version + 1, updated_at=now
        )

    def check_version(self, job: CronJob, version: int | None) -> None:
        if version is not None and version != job.version:
            raise Conflict(
                f"cron job {job.name!r} is at version {job.version}, not {version}: it changed "
                "since you read it; read it again and retry",
                {"version": job.version, "expected": version},
            )

    # -- changing -------------------------------------------------------------------------------

    async def create_job(self, spec: CronJobSpec, *, checked: bool = False) -> Written[CronJob]:
        """``CREATED``, or ``SAME`` when the name holds this very spec. ``checked``: the caller
        checked the target already (``cron apply`` checks a whole batch at once)."""
        if not checked:
            await self.check_target(spec)
        now = self.clock.now()
        existing = await self.cron.cron_job_get_by_name(self.tenant, spec.name)
        if existing is None:
            job = self.new_job(spec, now)
            if await self.cron.cron_job_insert(
                job, self.audit(job, AuditAction.CREATED, None, now)
            ):
                return Written(Outcome.CREATED, job)
            existing = await self.cron.cron_job_get_by_name(self.tenant, spec.name)
            assert existing is not None, "insert refused but no job holds the name"
        if existing.spec == spec:
            return Written(Outcome.SAME, existing)
        raise Conflict(
            f"a cron job named {spec.name!r} already exists with other settings "
            f"(id {existing.cron_job_id}); change it with PATCH "
            f"/v1/cron-jobs/{existing.cron_job_id} or choose another name",
            {"name": spec.name, "cronJobId": str(existing.cron_job_id)},
        )

    async def change(
        self, job: CronJob, spec: CronJobSpec, version: int | None = None
    ) -> Written[CronJob]:
        """``job`` (as read) changed to ``spec``: ``SAME`` when nothing differs (nothing
        written), else written (``CREATED``), the target checked again if it changed."""
        self.check_version(job, version)
        if spec == job.spec:
            return Written(Outcome.SAME, job)
        if _target_key(spec) != _target_key(job.spec):
            await self.check_target(spec)
        return Written(Outcome.CREATED, await self.update(job, spec))

    async def update(self, job: CronJob, spec: CronJobSpec) -> CronJob:
        """Writes ``spec`` unchecked (``change`` checks)."""
        now = self.clock.now()
        return await self.write(job, self.changed(job, spec, now), AuditAction.UPDATED, now)

    async def write(
        self,
        job: CronJob,
        changed: CronJob,
        action: AuditAction,
        now: datetime,
        records: list[OccurrenceRecord] | None = None,
    ) -> CronJob:
        """``changed`` in place of ``job``, unless someone changed ``job`` meanwhile."""
        audit = self.audit(changed, action, job, now)
        written = await self.cron.cron_job_update(changed, job.version, audit, records or [])
        if written is None:
            raise changed_meanwhile(job)
        return written

    async def pause_job(self, ref: str | uuid.UUID) -> Written[CronJob]:
        """Idempotent (``SAME`` when already paused). Nothing more is materialised until it is
        resumed, and what was materialised and has not started is cancelled. The job is paused
        first, so that a crash in between leaves it paused, and a retried pause cancels what
        the first did not."""
        job = await self.find(ref)
        now = self.clock.now()
        outcome = Outcome.SAME
        if job.status is not CronJobStatus.PAUSED:
            paused = replace(
                job,
                status=CronJobStatus.PAUSED,
                paused_at=now,
                version=job.version + 1,
                updated_at=now,
            )
            job = await self.write(job, paused, AuditAction.PAUSED, now)
            outcome = Outcome.CREATED
        await self.materialised.cancel(job, now)
        return Written(outcome, job)

    async def resume_job(self, ref: str | uuid.UUID, catch_up: bool) -> Written[CronJob]:
        """``SAME`` when active. ``catch_up``: the occurrences missed while paused follow the
        job's misfire policy; otherwise they are recorded SKIPPED_PAUSED and the job continues
        from now."""
        job = await self.find(ref)
        if job.status is CronJobStatus.ACTIVE:
            return Written(Outcome.SAME, job)
        now = self.clock.now()
        records: list[OccurrenceRecord] = []
        next_run = job.next_run_at
        if not catch_up and next_run is not None and next_run < now:
            records = self.materialised.missed_while_paused(job, now)
            next_run = Schedule(job.spec).next_fire(now - TINY)[0]
        resumed = replace(
            job,
            status=CronJobStatus.ACTIVE,
            paused_at=None,
            next_run_at=next_run,
            version=job.version + 1,
            updated_at=now,
        )
        written = await self.write(job, resumed, AuditAction.RESUMED, now, records)
        return Written(Outcome.CREATED, written)

    async def delete_job(self, ref: str | uuid.UUID, version: int | None = None) -> CronJob:
        """Deletes the job and its history, and cancels its occurrences not yet started; the
        job as it was."""
        job = await self.find(ref)
        self.check_version(job, version)
        now = self.clock.now()
        audit = self.audit(job, AuditAction.DELETED, job, now)
        if not await self.cron.cron_job_delete(self.tenant, job.cron_job_id, job.version, audit):
            raise changed_meanwhile(job)
        # What it had materialised and not started would otherwise run for up to a lead more.
        await self.materialised.cancel(job, now, record=False)
        return job

    def _snapshot(self, job: CronJob | None) -> dict[str, Any] | None:
        if job is None:
            return None
        return {**self.spec_document(job.spec), "status": str(job.status), "version": job.version}


def _target_key(spec: CronJobSpec) -> tuple[Any, ...]:
    """The fields that decide what an occurrence starts: a change to any of them is checked
    against the registries again."""
    return (
        spec.definition_uri,
        spec.definition_version,
        spec.workflow_name,
        spec.workflow_version,
        spec.inputs,
    )


def changed_meanwhile(job: CronJob) -> Conflict:
    return Conflict(
        f"cron job {job.name!r} changed while this request was handled; read it again and retry",
        {"version": job.version},
    )
