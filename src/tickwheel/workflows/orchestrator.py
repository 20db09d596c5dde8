"""The DAG orchestrator: consumes the outbox of finished task executions and advances their runs.

The transaction that finishes an execution whose key starts with ``wf:`` also writes an outbox
row (``workflow_events``). One tick claims a small batch of those rows under a lease (so several
orchestrators share the work, and a killed one's rows move on once its lease expires), records
each execution's outcome on its task run, evaluates only the runs concerned, submits what became
ready through the Client SDK and finishes runs. A row is deleted only after its effects are
stored: a crash before that leaves it to be claimed again, and redoing its effects resubmits the
same idempotency keys, so nothing is created twice.

Some work has no outbox row behind it: a run's roots are submitted by the request that starts
(or retries) the run, and a crash between the run's insert and those submissions leaves a run
RUNNING that no event will ever advance. The sweep covers that: at start and every
``sweep_every`` it asks the store for RUNNING runs with a PENDING task whose upstream tasks all
finished more than ``stall_grace`` ago (or whose tasks all finished, the run never ended), and
advances them. Several orchestrators may sweep the same run at once: the idempotency keys and
the guarded task-run writes make the second advance a no-op. Those writes also name the run's
``retry_count``: an orchestrator that stalled while a person retried the run changes nothing of
the new attempt (``tickwheel.app.workflow_runs`` says how).

Like the Cron Service it is built on the client and does not import the engine: its loop is the
service base below both (``tickwheel.services.base``). It sleeps on ``Topic.WORKFLOW``
(LISTEN/NOTIFY on PostgreSQL, an in-process signal on SQLite) and polls otherwise.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from datetime import datetime

from tickwheel.client.client import AsyncClient
from tickwheel.domain.clock import Clock
from tickwheel.domain.workflows import Workflow
from tickwheel.observability.metrics import Metrics
from tickwheel.services.base import Service
from tickwheel.services.settings import OrchestratorSettings
from tickwheel.store.protocol import SignalStore, Topic
from tickwheel.store.workflow_protocol import WorkflowEvent, WorkflowStore
from tickwheel.workflows.runs import WorkflowRuns

ClientFor = Callable[[str], AsyncClient]


class Orchestrator(Service):
    name = "orchestrator"
    idle_after_failure = True

    def __init__(
        self,
        workflows: WorkflowStore,
        store: SignalStore,
        client_for: ClientFor,
        *,
        clock: Clock | None = None,
        owner: str | None = None,
        metrics: Metrics | None = None,
        settings: OrchestratorSettings = OrchestratorSettings(),
    ) -> None:
        super().__init__(clock, owner=owner, metrics=metrics)
        self.workflows = workflows
        self.store = store  # only to sleep on Topic.WORKFLOW
        self.client_for = client_for
        self.lease, self.batch, self.poll = settings.lease, settings.batch, settings.poll
        self.stall_grace, self.sweep_every = settings.stall_grace, settings.sweep_every
        self._cache: dict[tuple[str, str, int], Workflow] = {}
        self._next_sweep: datetime | None = None  # None: sweep at the first tick

    def runs_for(self, tenant: str) -> WorkflowRuns:
        return WorkflowRuns(
            self.workflows, self.client_for(tenant), tenant, self.clock, cache=self._cache
        )

    def started_message(self) -> str:
        return (
            f"orchestrator {self.owner} started (claim {self.lease.total_seconds():g}s, sweep "
            f"every {self.sweep_every.total_seconds():g}s for runs stalled "
            f"{self.stall_grace.total_seconds():g}s)"
        )

    async def before_round(self) -> None:
        await self._sweep_if_due()

    async def idle(self, did: int) -> None:
        """Sleeps on ``Topic.WORKFLOW`` until an outbox row is written, or ``poll`` at most.
        A failed tick's claimed rows stay and come back when their lease expires."""
        if not did and not self.stopping:
            await self.store.wait_for(Topic.WORKFLOW, self.poll)

    async def _sweep_if_due(self) -> None:
        now = self.clock.now()
        if self._next_sweep is not None and now < self._next_sweep:
            return
        # Jittered, so that orchestrators started together do not sweep in step.
        self._next_sweep = now + self.sweep_every * random.uniform(0.8, 1.2)
        await self.sweep()

    async def sweep(self) -> int:
        """Advances every stalled run, a bounded page at a time; returns how many it advanced.
        A run whose advance fails stays stalled and is retried at the next sweep."""
        advanced = 0
        after: uuid.UUID | None = None
        while True:
            stalled = await self.workflows.workflow_run_list_stalled(
                self.stall_grace, self.batch, after, self.store_now()
            )
            for run_id in stalled:
                self.log.warning(
                    "workflow run %s stalled (no progress for %gs): advancing it",
                    run_id,
                    self.stall_grace.total_seconds(),
                )
                try:
                    await self._handle(run_id, [])
                except Exception:
                    self.log.exception("workflow run %s: advancing the stalled run failed", run_id)
                    continue
                advanced += 1
            if len(stalled) < self.batch:
                break
            after = stalled[-1]  # keyset: a run that cannot advance does not hold the page
        self.metrics.workflow_runs_swept.inc(advanced)
        return advanced

    async def run_once(self) -> int:
        """Claims one batch of outbox rows and handles them; returns how many were consumed."""
        events = await self.workflows.workflow_event_claim(
            self.owner, self.batch, self.lease, self.store_now()
        )
        by_run: dict[uuid.UUID, list[WorkflowEvent]] = {}
        for event in events:
            by_run.setdefault(event.workflow_run_id, []).append(event)
        consumed = 0
        for run_id, run_events in by_run.items():
            try:
                await self._handle(run_id, run_events)
            except Exception:
                # This run's rows stay claimed until the lease ends, then anyone retries them.
                self.log.exception("workflow run %s: handling its events failed", run_id)
                continue
            consumed += await self.workflows.workflow_event_delete(
                self.owner, [e.event_id for e in run_events]
            )
        if consumed:
            self.metrics.workflow_events.inc(consumed)
            self.log.debug("consumed %d workflow events of %d runs", consumed, len(by_run))
        return consumed

    async def _handle(self, run_id: uuid.UUID, events: list[WorkflowEvent]) -> None:
        run = await self.workflows.workflow_run_get(None, run_id)
        if run is None:
            return  # the run is gone (pruned): nothing to do
        runs = self.runs_for(run.tenant)
        for event in events:
            await runs.finished(run_id, event.execution_id, advance=False)
        await runs.advance(run_id)
