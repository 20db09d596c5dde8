"""The cron API's wire form on top of the cron job rules (``tickwheel.app.cron_jobs``): the
in-process cron transport.

The API routes call it for the caller's tenant (and name the caller as the actor of the audit
trail); SDK code running inside the server can hand it to ``AsyncClient(cron_transport=...)``.
It speaks the same wire format as the HTTP API (``client/cron_wire.py``), so both transports
behave alike: a created job is 201, one that exists with the same content 200, a stale
``version`` 409, a target that does not exist or refuses the inputs 422. It also holds what
the rules reach through ports: the materialised occurrences (``pause.py``), the audit trail's
spec documents, and the on-demand runs through the SDK (``manual.py``).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tickwheel.app.cron_apply import Applied, CronApplyService
from tickwheel.app.cron_jobs import CronJobService
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
from tickwheel.cron.expressions import preview_document
from tickwheel.cron.manual import backfill, trigger
from tickwheel.cron.pause import cancel_materialised, cancel_materialised_many, paused_records
from tickwheel.cron.schedule import Schedule
from tickwheel.domain.clock import Clock
from tickwheel.domain.cron_jobs import CronJob, CronJobStatus, OccurrenceRecord
from tickwheel.domain.errors import FieldError, InvalidInput
from tickwheel.resources.cron import ApplyResult, PlanItem, PlanSummary
from tickwheel.store.cron_protocol import CronStore
from tickwheel.store.protocol import Store
from tickwheel.store.workflow_protocol import WorkflowStore

if TYPE_CHECKING:
    from tickwheel.client.client import AsyncClient

NEXT_FIRES = 5
MAX_PAGE = 200


class _Materialised:
    """The rules' ``Materialised`` port: the Cron Service's executions, through ``pause.py``."""

    def __init__(self, cron: CronStore, store: Store) -> None:
        self.cron = cron
        self.store = store

    async def cancel(
        self, job: CronJob, now: datetime, *, record: bool = True
    ) -> list[OccurrenceRecord]:
        return await cancel_materialised(self.cron, self.store, job, now, record=record)

    async def cancel_many(self, tenant: str, cron_job_ids: set[uuid.UUID], now: datetime) -> int:
        return await cancel_materialised_many(self.store, tenant, cron_job_ids, now)

    def missed_while_paused(self, job: CronJob, now: datetime) -> list[OccurrenceRecord]:
        return paused_records(job, now)


class CronJobs(CronJobService):
    def __init__(
        self,
        cron: CronStore,
        store: Store,
        tenant: str,
        actor: str,
        clock: Clock | None = None,
        workflows: WorkflowStore | None = None,
    ) -> None:
        super().__init__(
            cron,
            store,
            tenant,
            actor,
            spec_document=spec_to_wire,
            materialised=_Materialised(cron, store),
            workflows=workflows,
            clock=clock,
        )

    @property
    def workflows(self) -> WorkflowStore:
        """Callers that do not pass the workflow store (the dashboard) get the one on the same
        database as ``store``."""
        if self._workflows is None:
            from tickwheel.store.factory import workflow_store_for

            self._workflows = workflow_store_for(self.store)
        return self._workflows

    async def close(self) -> None:
        """The stores belong to whoever opened them."""

    # -- reading --------------------------------------------------------------------------------

    async def find(self, ref: str | uuid.UUID) -> CronJob:
        """A wire ref: an id, or a name."""
        return await super().find(parse_ref(ref) if isinstance(ref, str) else ref)

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

    # -- changing (the rules: ``app/cron_jobs.py``) ---------------------------------------------

    async def cron_create(self, doc: Wire) -> tuple[Wire, bool]:
        written = await self.create_job(spec_from_wire(doc))
        return self.render(written.value), written.created

    async def cron_update(self, ref: str, doc: Wire) -> Wire:
        job = await self.find(ref)
        version = doc.get("version")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            raise InvalidInput(
                "version must be an integer", [FieldError("version", "must be an integer")]
            )
        # A stale version is the answer even when the changes are malformed too.
        self.check_version(job, version)
        spec = spec_from_wire({k: v for k, v in doc.items() if k != "version"}, job.spec)
        return self.render((await self.change(job, spec)).value)

    async def cron_pause(self, ref: str) -> Wire:
        return self.render((await self.pause_job(ref)).value)

    async def cron_resume(self, ref: str, catch_up: bool) -> Wire:
        return self.render((await self.resume_job(ref, catch_up)).value)

    async def cron_delete(self, ref: str, version: int | None = None) -> Wire:
        job = await self.delete_job(ref, version)
        return {"deleted": True, "cronJob": self.render(job, next_fires=False)}

    async def cron_apply(
        self,
        docs: list[Any],
        prune: bool,
        dry_run: bool,
        label: str | None = None,
        apply_key: str | None = None,
    ) -> Wire:
        """The rules are ``app/cron_apply.py``'s; the answer is the API's (``ApplyResult``)."""
        applied = await CronApplyService(self, spec_from_wire).apply(
            docs, prune=prune, dry_run=dry_run, label=label, apply_key=apply_key
        )
        return applied_to_wire(applied)

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


def applied_to_wire(applied: Applied) -> Wire:
    plan = [
        PlanItem(action=s.action, name=s.name, cron_job_id=s.cron_job_id, changes=list(s.changes))
        for s in applied.plan
    ]
    return ApplyResult(
        dry_run=applied.dry_run,
        prune=applied.prune,
        label=applied.label,
        plan=plan,
        summary=PlanSummary.model_validate(applied.summary),
        replayed=applied.replayed,
    ).to_wire()
