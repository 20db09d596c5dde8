"""The cron API's rules applied straight to the stores: the in-process cron transport.

The API routes call it for the caller's tenant (and name the caller as the actor of the audit
trail); SDK code running inside the server can hand it to ``AsyncClient(cron_transport=...)``.
It speaks the same wire format as the HTTP API (``client/cron_wire.py``), so both transports
behave alike.

Rules worth knowing:
* A job targets a Job Definition (``definitionUri``) or a Workflow (``workflow: {name,
  version}``), exactly one. A null version means *latest*, resolved again at every occurrence
  (the job shows ``definitionVersionPolicy``/``workflowVersionPolicy: latest``); a number pins
  it. Either way the target must exist and accept the job's inputs when the job is created or
  changed (a 422 otherwise).
* Every change is guarded by the job's ``version``: a PATCH or DELETE that names an older one
  gets 409, and a change made between reading and writing here gets 409 too.
* Creating a job whose name exists with the same content returns it (200), so a retried create
  is harmless; with other content it is a 409.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tickwheel.client.cron_wire import (
    Wire,
    audit_to_wire,
    history_cursor,
    job_to_wire,
    name_cursor,
    parse_ref,
    read_history_cursor,
    read_name_cursor,
    record_to_wire,
    spec_from_wire,
    spec_to_wire,
)
from tickwheel.cron.apply import apply_jobs
from tickwheel.cron.checks import check_definition, check_workflow
from tickwheel.cron.expressions import preview_document
from tickwheel.cron.manual import backfill, trigger
from tickwheel.cron.pause import cancel_materialised, paused_records
from tickwheel.cron.schedule import TINY, Schedule
from tickwheel.domain.clock import Clock, SystemClock
from tickwheel.domain.cron_jobs import (
    AuditAction,
    AuditEntry,
    CronJob,
    CronJobSpec,
    CronJobStatus,
    OccurrenceRecord,
)
from tickwheel.domain.errors import Conflict, FieldError, InvalidInput, NotFound
from tickwheel.domain.ids import uuid7
from tickwheel.store.cron_protocol import CronStore
from tickwheel.store.protocol import Store
from tickwheel.store.workflow_protocol import WorkflowStore

if TYPE_CHECKING:
    from tickwheel.client.client import AsyncClient

NEXT_FIRES = 5
MAX_PAGE = 200


class CronJobs:
    def __init__(
        self,
        cron: CronStore,
        store: Store,
        tenant: str,
        actor: str,
        clock: Clock | None = None,
        workflows: WorkflowStore | None = None,
    ) -> None:
        self.cron = cron
        self.store = store
        self.tenant = tenant
        self.actor = actor
        self.clock = clock or SystemClock()
        self._workflows = workflows

    @property
    def workflows(self) -> WorkflowStore:
        """The workflow registry and runs, for jobs that target a workflow. Callers that do not
        pass it (the dashboard) get the one on the same database as ``store``."""
        if self._workflows is None:
            from tickwheel.store.factory import workflow_store_for

            self._workflows = workflow_store_for(self.store)
        return self._workflows

    async def close(self) -> None:
        """The stores belong to whoever opened them."""

    # -- reading --------------------------------------------------------------------------------

    async def find(self, ref: str | uuid.UUID) -> CronJob:
        """By id or by name, in this tenant only (another tenant's job is simply not found)."""
        key = parse_ref(ref) if isinstance(ref, str) else ref
        if isinstance(key, uuid.UUID):
            job = await self.cron.cron_job_get(self.tenant, key)
        else:
            job = await self.cron.cron_job_get_by_name(self.tenant, key)
        if job is None:
            raise NotFound(f"no cron job {ref}")
        return job

    def render(self, job: CronJob, *, next_fires: bool = True) -> Wire:
        if not next_fires:
            return job_to_wire(job)
        upcoming = []
        if job.status is CronJobStatus.ACTIVE and job.next_run_at is not None:
            upcoming = Schedule(job.spec).upcoming(self.clock.now(), NEXT_FIRES)
        return job_to_wire(job, upcoming)

    async def cron_get(self, ref: str) -> Wire:
        return self.render(await self.find(ref))

    async def cron_list(self, cursor: str | None, limit: int) -> Wire:
        limit = max(1, min(limit, MAX_PAGE))
        after = read_name_cursor(cursor) if cursor is not None else None
        jobs = await self.cron.cron_job_list(self.tenant, after, limit + 1)
        page = jobs[:limit]
        more = len(jobs) > limit
        return {
            "items": [self.render(j, next_fires=False) for j in page],
            "nextCursor": name_cursor(page[-1].name) if more and page else None,
        }

    async def cron_history(self, ref: str, cursor: str | None, limit: int) -> Wire:
        """Every occurrence, newest first: the executions it became, with their status, and
        the ones that did not become one, with the reason."""
        job = await self.find(ref)
        limit = max(1, min(limit, MAX_PAGE))
        before = read_history_cursor(cursor) if cursor else None
        rows = await self.cron.cron_occurrence_list(self.tenant, job.cron_job_id, before, limit + 1)
        page = rows[:limit]
        items = []
        for row in page:
            status = run_status = None
            if row.execution_id is not None:
                execution = await self.store.execution_get(self.tenant, row.execution_id)
                status = str(execution.status) if execution else None
            if row.workflow_run_id is not None:
                run = await self.workflows.workflow_run_get(self.tenant, row.workflow_run_id)
                run_status = str(run.status) if run else None
            items.append(record_to_wire(row, status, run_status))
        more = len(rows) > limit and page
        return {
            "cronJobId": str(job.cron_job_id),
            "items": items,
            "nextCursor": history_cursor(page[-1]) if more else None,
        }

    async def cron_audit(self, ref: str, limit: int = MAX_PAGE) -> Wire:
        job = await self.find(ref)
        entries = await self.cron.cron_audit_list(self.tenant, job.cron_job_id, limit)
        return {"items": [audit_to_wire(e) for e in entries]}

    async def cron_preview(
        self,
        expression: str,
        timezone: str,
        after: datetime | None,
        count: int,
        dst_policy: dict[str, Any] | None = None,
    ) -> Wire:
        """For people writing expressions: nothing is stored (``expressions.py``)."""
        start = after or self.clock.now()
        return preview_document(expression, timezone, start, count, dst_policy)

    # -- changing -------------------------------------------------------------------------------

    async def check_target(self, spec: CronJobSpec, path: str = "") -> None:
        """The target exists and accepts the inputs (``checks.py``), else ``InvalidInput``."""
        if spec.workflow_name is not None:
            await check_workflow(self.workflows, self.tenant, spec, path)
        else:
            await check_definition(self.store, self.tenant, spec, path)

    def first_run(self, spec: CronJobSpec, now: datetime) -> datetime | None:
        return Schedule(spec).next_fire(now)[0]

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
            before=_snapshot(before),
            after=_snapshot(job) if action is not AuditAction.DELETED else None,
        )

    async def cron_create(self, doc: Wire) -> tuple[Wire, bool]:
        spec = spec_from_wire(doc)
        await self.check_target(spec)
        return await self.create(spec)

    async def create(self, spec: CronJobSpec) -> tuple[Wire, bool]:
        now = self.clock.now()
        existing = await self.cron.cron_job_get_by_name(self.tenant, spec.name)
        if existing is None:
            job = CronJob(
                cron_job_id=uuid7(now),
                tenant=self.tenant,
                spec=spec,
                status=CronJobStatus.ACTIVE,
                next_run_at=self.first_run(spec, now),
                version=1,
                created_at=now,
                updated_at=now,
            )
            if await self.cron.cron_job_insert(
                job, self.audit(job, AuditAction.CREATED, None, now)
            ):
                return self.render(job), True
            existing = await self.cron.cron_job_get_by_name(self.tenant, spec.name)
            assert existing is not None, "insert refused but no job holds the name"
        if existing.spec == spec:
            return self.render(existing), False
        raise Conflict(
            f"a cron job named {spec.name!r} already exists with other settings "
            f"(id {existing.cron_job_id}); change it with PATCH "
            f"/v1/cron-jobs/{existing.cron_job_id} or choose another name",
            {"name": spec.name, "cronJobId": str(existing.cron_job_id)},
        )

    async def cron_update(self, ref: str, doc: Wire) -> Wire:
        job = await self.find(ref)
        version = doc.get("version")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            raise InvalidInput(
                "version must be an integer", [FieldError("version", "must be an integer")]
            )
        self._check_version(job, version)
        spec = spec_from_wire({k: v for k, v in doc.items() if k != "version"}, job.spec)
        if spec == job.spec:
            return self.render(job)
        if _target_key(spec) != _target_key(job.spec):
            await self.check_target(spec)
        return self.render(await self.update(job, spec))

    async def update(self, job: CronJob, spec: CronJobSpec) -> CronJob:
        """Writes ``spec``; a change to when the job fires recomputes its next run from now (a
        change to inputs or policies keeps it)."""
        now = self.clock.now()
        return await self._write(job, self.changed(job, spec, now), AuditAction.UPDATED, now)

    def changed(self, job: CronJob, spec: CronJobSpec, now: datetime) -> CronJob:
        """The job as ``update`` writes it (``cron apply`` writes many at once)."""
        next_run = job.next_run_at
        if spec.schedule_key() != job.spec.schedule_key():
            next_run = self.first_run(spec, now)
        return replace(
            job, spec=spec, next_run_at=next_run, version=job.version + 1, updated_at=now
        )

    async def _write(
        self,
        job: CronJob,
        changed: CronJob,
        action: AuditAction,
        now: datetime,
        records: list[OccurrenceRecord] | None = None,
    ) -> CronJob:
        audit = self.audit(changed, action, job, now)
        written = await self.cron.cron_job_update(changed, job.version, audit, records or [])
        if written is None:
            raise _changed_meanwhile(job)
        return written

    def _check_version(self, job: CronJob, version: int | None) -> None:
        if version is not None and version != job.version:
            raise Conflict(
                f"cron job {job.name!r} is at version {job.version}, not {version}: it changed "
                "since you read it; read it again and retry",
                {"version": job.version, "expected": version},
            )

    async def cron_pause(self, ref: str) -> Wire:
        """Idempotent. The service materialises nothing more until resumed, and the occurrences
        it already materialised (at most its lead, 60 s by default, ahead) that have not started
        are cancelled and recorded (``pause.py``). The job is paused first, so that a crash in
        between leaves it paused, and a retried pause cancels what the first did not."""
        job = await self.find(ref)
        now = self.clock.now()
        if job.status is not CronJobStatus.PAUSED:
            paused = replace(
                job,
                status=CronJobStatus.PAUSED,
                paused_at=now,
                version=job.version + 1,
                updated_at=now,
            )
            job = await self._write(job, paused, AuditAction.PAUSED, now)
        await cancel_materialised(self.cron, self.store, job, now)
        return self.render(job)

    async def cron_resume(self, ref: str, catch_up: bool) -> Wire:
        """``catch_up``: the occurrences missed while paused follow the job's misfire policy.
        Otherwise they are recorded SKIPPED_PAUSED and the job continues from now."""
        job = await self.find(ref)
        if job.status is CronJobStatus.ACTIVE:
            return self.render(job)
        now = self.clock.now()
        records: list[OccurrenceRecord] = []
        next_run = job.next_run_at
        if not catch_up and next_run is not None and next_run < now:
            records = paused_records(job, now)
            next_run = Schedule(job.spec).next_fire(now - TINY)[0]
        resumed = replace(
            job,
            status=CronJobStatus.ACTIVE,
            paused_at=None,
            next_run_at=next_run,
            version=job.version + 1,
            updated_at=now,
        )
        return self.render(await self._write(job, resumed, AuditAction.RESUMED, now, records))

    async def cron_delete(self, ref: str, version: int | None = None) -> Wire:
        """Deletes the job and its history, and cancels its occurrences not yet started."""
        job = await self.find(ref)
        self._check_version(job, version)
        now = self.clock.now()
        audit = self.audit(job, AuditAction.DELETED, job, now)
        if not await self.cron.cron_job_delete(self.tenant, job.cron_job_id, job.version, audit):
            raise _changed_meanwhile(job)
        # What it had materialised and not started would otherwise run for up to a lead more.
        await cancel_materialised(self.cron, self.store, job, now, record=False)
        return {"deleted": True, "cronJob": self.render(job, next_fires=False)}

    async def cron_apply(
        self,
        docs: list[Any],
        prune: bool,
        dry_run: bool,
        label: str | None = None,
        apply_key: str | None = None,
    ) -> Wire:
        return await apply_jobs(
            self, docs, prune=prune, dry_run=dry_run, label=label, apply_key=apply_key
        )

    # -- on demand (cron/manual.py); the API passes a client with the workflow API --------------

    async def cron_trigger(
        self, ref: str, key: str | None, client: AsyncClient | None = None
    ) -> Wire:
        job = await self.find(ref)
        return await trigger(self.cron, client or self._client(), job, self.actor, self.clock, key)

    async def cron_backfill(
        self, ref: str, start: datetime, end: datetime, client: AsyncClient | None = None
    ) -> Wire:
        job = await self.find(ref)
        client = client or self._client()
        return await backfill(self.cron, client, job, self.actor, self.clock, start, end)

    def _client(self) -> AsyncClient:
        """Executions through the store, by the API's rules (no workflow API in process)."""
        from tickwheel.client.client import AsyncClient
        from tickwheel.client.transports.inprocess import InProcessTransport

        return AsyncClient(transport=InProcessTransport(self.store, self.tenant, self.clock))


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


def _changed_meanwhile(job: CronJob) -> Conflict:
    return Conflict(
        f"cron job {job.name!r} changed while this request was handled; read it again and retry",
        {"version": job.version},
    )


def _snapshot(job: CronJob | None) -> dict[str, Any] | None:
    if job is None:
        return None
    return {**spec_to_wire(job.spec), "status": str(job.status), "version": job.version}
