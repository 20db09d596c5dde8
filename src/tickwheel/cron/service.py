"""The Cron Service: turns due occurrences of cron jobs into Executions (or, for a job that
targets a workflow, Workflow Runs), each exactly once.

One tick: claim a batch of due jobs (a lease, so a killed instance's jobs move on to another),
plan each with ``policies.plan_tick``, materialise the occurrences through the Client SDK
(``submissions.py``) with the key ``cron:<cronJobId>:<occurrence>`` (``cron-wf:`` for workflow
runs, ``targets.py``), planning a job again just before its submission if the tick fell behind,
then record the history and advance every job's ``next_run_at`` in one transaction, each job's
write guarded on its own. A crash between submitting and advancing leaves the job where it was;
whoever claims it next submits the same keys again and gets the same executions back: nothing
new is created, and the history rows, unique per occurrence and outcome, are written once.

The service never touches the executions table: it sees executions only through the SDK
(in-process inside ``tickwheel server``, HTTP as ``tickwheel cron run``), so every occurrence
obeys the same validation and idempotency rules as any other submission.

Its loop is the one service base (``tickwheel.services.base``) the engine's services use too:
cron is built on the client and must not import the engine, and the base sits below both.
Between herds it sleeps until the next job is due, woken sooner by a change to a job
(``CronStore.cron_wait``); a herd is worked on ``parallel`` claims at once.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime

from tickwheel.client.client import AsyncClient
from tickwheel.cron.pause import cancel_submitted
from tickwheel.cron.policies import Plan, plan_tick
from tickwheel.cron.schedule import Schedule
from tickwheel.cron.submissions import SUBMIT_CHUNK, Results, submit_batch, submit_guarded
from tickwheel.cron.targets import PreviousRun
from tickwheel.domain.clock import Clock
from tickwheel.domain.cron_jobs import CronJob, CronJobStatus, CronTarget, OccurrenceRecord, Outcome
from tickwheel.domain.errors import InvalidInput
from tickwheel.services.base import Service
from tickwheel.services.settings import CronSettings
from tickwheel.store.cron_protocol import CronAdvance, CronClaim, CronStore

MAX_OCCURRENCES = 5000
MIN_SLEEP = 0.05

ClientFor = Callable[[str], AsyncClient]


class CronService(Service):
    name = "cron"
    idle_after_failure = True

    def __init__(
        self,
        store: CronStore,
        client_for: ClientFor,
        *,
        clock: Clock | None = None,
        owner: str | None = None,
        tenant: str | None = None,
        settings: CronSettings = CronSettings(),
    ) -> None:
        super().__init__(clock, owner=owner)
        self.store = store
        self.client_for = client_for
        self.tenant = tenant
        self.lead, self.grace, self.lease = settings.lead, settings.grace, settings.lease
        self.batch, self.poll, self.max_sleep = settings.batch, settings.poll, settings.max_sleep
        self.parallel = settings.parallel
        self.sleep = settings.poll
        """Seconds the next idle round sleeps at most (tests read it): until the next job is
        due, as the store found when a claim came back empty; the poll after a failed round."""
        self.submit_chunk = SUBMIT_CHUNK
        """Occurrences per ``submit_many``; the clock is read again before each."""
        self.max_occurrences = MAX_OCCURRENCES
        """Occurrences one tick submits at most (whole jobs, at least one): 500 every-second
        jobs a lead ahead are 45,000, too many to submit within the claim's lease."""
        self.counts: Counter[Outcome] = Counter()
        """Occurrences by outcome since start (tests read it; /metrics has the same counts)."""

    # -- the loop (``Service.run``) --------------------------------------------------------------

    def started_message(self) -> str:
        return f"cron service {self.owner} started"

    def stopped_message(self) -> str:
        return f"cron service {self.owner} stopped"

    async def idle(self, did: int) -> None:
        """After a tick that did something, the next one at once. Otherwise it sleeps until the
        next job is due (``sleep``), and a change to a job wakes it sooner: a job created,
        edited or resumed may be due now (``Topic.CRON``, NOTIFY on PostgreSQL). Wake-ups are
        hints that can be lost, so the sleep never exceeds ``max_sleep``. A failed tick
        released its unfinished claims; the next one resubmits the same keys."""
        if did or self.stopping:
            return
        await self.wait_or_stop(self.store.cron_wait(self.sleep))

    async def _until_due(self) -> float:
        """Seconds to sleep when nothing could be claimed: until the store's next due job (by
        its clock, or the fake one), at least ``MIN_SLEEP`` (a job another instance is claiming
        right now looks due and is not ours), at most ``max_sleep``."""
        wait = await self.store.cron_job_next_due(self.lead, self.tenant, self.store_now())
        if wait is None:
            return self.max_sleep
        return min(self.max_sleep, max(MIN_SLEEP, wait.total_seconds()))

    # -- one tick -------------------------------------------------------------------------------

    async def run_once(self) -> int:
        """Claims one batch of due jobs and handles it; returns how many jobs it advanced.
        With nothing to claim, it finds how long the service may sleep (``sleep``). A full
        batch means a herd: it then works on ``parallel`` claims at once (below)."""
        self.sleep = self.poll  # what a round that fails from here on waits
        claim = await self._claim()
        if not claim.jobs:
            self.sleep = await self._until_due()
            return 0
        if len(claim.jobs) < self.batch or self.parallel <= 1:
            return await self._handle(claim)
        return await self._handle_herd(claim)

    async def _claim(self) -> CronClaim:
        return await self.store.cron_job_claim_due(
            self.owner, self.batch, self.lead, self.lease, self.tenant, self.store_now()
        )

    async def _handle_herd(self, first: CronClaim) -> int:
        """A tick is a chain of waits (the claim, the API's insert, the advance), each short of
        a core: ``parallel`` claims worked on at once overlap them. Each claim is a tick of
        its own (its lease, its advance, its release on failure); every one finishes, and
        then the first failure, if any, is the round's."""

        async def claimed() -> int:
            claim = await self._claim()
            return await self._handle(claim) if claim.jobs else 0

        ticks = [self._handle(first), *(claimed() for _ in range(self.parallel - 1))]
        results = await asyncio.gather(*ticks, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return sum(r for r in results if isinstance(r, int))

    async def _handle(self, claim: CronClaim) -> int:
        """One claim's tick; the claims it did not advance are released, whatever happens."""
        unfinished = {job.cron_job_id for job in claim.jobs}
        local = self.clock.now()

        def current() -> datetime:
            """The claim's instant plus the time the tick has taken so far (this process's
            clock measures the elapsed time; the claim's instant stays the database's)."""
            return claim.now + (self.clock.now() - local)

        try:
            advanced = 0
            for tenant in sorted({job.tenant for job in claim.jobs}):
                jobs = [job for job in claim.jobs if job.tenant == tenant]
                advanced += await self._tick(
                    self.client_for(tenant), jobs, claim.now, unfinished, current
                )
            return advanced
        finally:
            if unfinished:  # a failure part-way: let the next tick (any instance) retry soon
                await self.store.cron_job_release(self.owner, sorted(unfinished))

    async def _tick(
        self,
        client: AsyncClient,
        jobs: list[CronJob],
        now: datetime,
        unfinished: set[uuid.UUID],
        current: Callable[[], datetime],
    ) -> int:
        plans: dict[uuid.UUID, Plan] = {}
        budget = self.max_occurrences
        for job in jobs:
            if budget <= 0:
                break  # left unplanned and released: the next tick (any instance) takes them
            try:
                plan = plan_tick(job, Schedule(job.spec), now, self.lead, self.grace)
            except InvalidInput:  # e.g. its zone vanished from this machine's tz database
                self.log.exception("cron job %s (%s) cannot be planned", job.name, job.cron_job_id)
                unfinished.discard(job.cron_job_id)  # keep the claim: retry when it expires
                continue
            plans[job.cron_job_id] = plan
            budget -= sum(step.submit for step in plan.steps)
        done: Results = {}
        extra: list[OccurrenceRecord] = []
        planned_at = dict.fromkeys(plans, now)
        batched = [job for job in jobs if _batched(job) and job.cron_job_id in plans]
        for group in self._groups(batched, plans):
            self._replan_late(group, plans, planned_at, current())
            done |= await submit_batch(client, group, plans, now)
        for job in jobs:
            if not _batched(job) and job.cron_job_id in plans:
                self._replan_late([job], plans, planned_at, current())
                done |= await submit_guarded(client, job, plans[job.cron_job_id], now, extra)
        advances = [
            self._advance_of(
                job,
                plans[job.cron_job_id],
                done,
                [r for r in extra if r.cron_job_id == job.cron_job_id],
                now,
            )
            for job in jobs
            if job.cron_job_id in plans
        ]
        by_id = {job.cron_job_id: job for job in jobs}
        # One transaction for the whole tick, each job still guarded on its own.
        moved = await self.store.cron_job_advance_many(self.owner, advances, self.store_now())
        for advance in advances:
            unfinished.discard(advance.cron_job_id)
            self.counts.update(r.outcome for r in advance.records)
            for r in advance.records:  # tickwheel_cron_occurrences{outcome} on /metrics
                self.metrics.cron_occurrence(str(r.outcome))
            if advance.cron_job_id not in moved:
                self.log.info(
                    "cron job %s changed or was reclaimed during the tick; it continues from "
                    "its new state",
                    advance.cron_job_id,
                )
                await self._sweep_if_paused(client, by_id[advance.cron_job_id], advance.records)
        return len(moved)

    async def _sweep_if_paused(
        self, client: AsyncClient, job: CronJob, records: Sequence[OccurrenceRecord]
    ) -> None:
        """A pause (or delete) that landed between this tick's claim and its submissions swept
        before they existed: what this tick made must not run either."""
        current = await self.store.cron_job_get(job.tenant, job.cron_job_id)
        if current is None or current.status is CronJobStatus.PAUSED:
            await cancel_submitted(client, self.store, job, records, record=current is not None)

    def _groups(self, jobs: list[CronJob], plans: dict[uuid.UUID, Plan]) -> list[list[CronJob]]:
        """Whole jobs in groups of at most ``submit_chunk`` occurrences (one job more, if it
        alone has more): one ``submit_many`` each, and a look at the clock before each."""
        groups: list[list[CronJob]] = []
        size = self.submit_chunk
        for job in jobs:
            steps = sum(step.submit for step in plans[job.cron_job_id].steps)
            if not groups or size + steps > self.submit_chunk:
                groups.append([])
                size = 0
            groups[-1].append(job)
            size += steps
        return groups

    def _replan_late(
        self,
        jobs: list[CronJob],
        plans: dict[uuid.UUID, Plan],
        planned_at: dict[uuid.UUID, datetime],
        at: datetime,
    ) -> None:
        """Plans again, at ``at``, each job with an occurrence that was on time when planned
        and is now more than the grace late: the tick fell behind (a slow API, a large batch,
        an overloaded machine). Whatever made it late, a late occurrence follows the misfire
        policy, with the reason in its history row."""
        cutoff = at - self.grace
        for job in jobs:
            plan, then = plans[job.cron_job_id], planned_at[job.cron_job_id]
            if any(
                step.submit and then - self.grace <= step.occurrence < cutoff for step in plan.steps
            ):
                schedule = Schedule(job.spec)
                plans[job.cron_job_id] = plan_tick(
                    job, schedule, at, self.lead, self.grace, behind=at - then
                )
                planned_at[job.cron_job_id] = at

    def _advance_of(
        self,
        job: CronJob,
        plan: Plan,
        done: Results,
        extra: list[OccurrenceRecord],
        now: datetime,
    ) -> CronAdvance:
        records: list[OccurrenceRecord] = list(extra)
        last: tuple[datetime, PreviousRun] | None = None
        for step in plan.steps:
            result = done.get((job.cron_job_id, step.occurrence)) if step.submit else None
            if step.submit and result is None:
                continue  # not attempted (cannot happen unless planning failed): not recorded
            outcome = result.outcome if result else step.outcome
            assert outcome is not None
            reason = "; ".join(r for r in (step.reason, result.reason if result else None) if r)
            records.append(
                OccurrenceRecord(
                    job.cron_job_id,
                    step.occurrence,
                    outcome,
                    now,
                    execution_id=result.execution_id if result else None,
                    execute_at=result.execute_at if result else None,
                    reason=reason or None,
                    workflow_run_id=result.workflow_run_id if result else None,
                )
            )
            if result and (started := result.started) is not None:
                last = (step.occurrence, started)
        return CronAdvance(
            cron_job_id=job.cron_job_id,
            expected_version=job.version,
            expected_next_run_at=job.next_run_at,
            next_run_at=plan.next_run_at,
            last_occurrence=last[0] if last else None,
            last_execution_id=_run_of(last, CronTarget.DEFINITION),
            last_workflow_run_id=_run_of(last, CronTarget.WORKFLOW),
            records=records,
        )


def _batched(job: CronJob) -> bool:
    """Jobs whose due occurrences all go into one ``submit_many`` per tick: no overlap check,
    and an execution (not a workflow run) per occurrence."""
    return job.spec.materialised_ahead


def _run_of(last: tuple[datetime, PreviousRun] | None, kind: CronTarget) -> uuid.UUID | None:
    return last[1].run_id if last is not None and last[1].kind is kind else None
