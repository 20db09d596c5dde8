"""One attempt on a worker, from its claim to its result in the report buffer: the checks
before it runs (a cancel, its startBy or deadline, its definition), the handler under its
heartbeat and time limit, then its outcome (a result, a snooze, a cancel, or nothing for a lost
lease). ``Worker`` runs one task of ``Attempts._attempt`` per claimed execution.

This is the worker's per-execution path: what it costs is paid once per execution, so it builds
as little as it can (engine/heartbeat.py, engine/runners/timeouts.py, the lazy log fields)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta

from tickwheel.domain.backoff import Uniform
from tickwheel.domain.clock import Clock
from tickwheel.domain.definitions import Definition
from tickwheel.domain.models import Execution
from tickwheel.engine import cancellation
from tickwheel.engine.deadlines import TooLate, deadline_result, expire_claimed, too_late
from tickwheel.engine.definition_cache import DefinitionCache
from tickwheel.engine.heartbeat import Heartbeats
from tickwheel.engine.outcomes import attempt_result
from tickwheel.engine.reporting import Finished, ResultBuffer
from tickwheel.engine.runners import Runner, RunOutcome, run_attempt
from tickwheel.engine.runners.attempt_state import AttemptState
from tickwheel.engine.runners.base import job_context
from tickwheel.observability.logs import bind_execution, execution_fields
from tickwheel.observability.metrics import Metrics
from tickwheel.store.protocol import WorkerStore


class Attempts:
    """The worker's attempts (a part of ``Worker``, which sets these attributes)."""

    store: WorkerStore
    clock: Clock
    worker_id: str
    runners: Mapping[str, Runner]
    uniform: Uniform
    max_inline_output: int
    cancel_grace: float
    lease: timedelta
    definitions: DefinitionCache
    heartbeats: Heartbeats
    results: ResultBuffer
    stale_writes: int
    metrics: Metrics
    log: logging.Logger

    def store_now(self) -> datetime | None:  # Service's comes first in Worker's bases
        raise NotImplementedError

    async def _attempt(self, execution: Execution) -> None:
        token = execution.fencing_token
        assert token is not None
        # This task's own context: whatever is logged while the attempt runs (runners included)
        # names the execution, its attempt, token and this worker.
        bind_execution(execution, self.worker_id)
        started = self.clock.now()
        if execution.cancel_requested_at is not None:
            # Asked to stop while an earlier attempt was finishing: it does not run again.
            self._report_cancelled(execution, started)
            return
        if (execution.start_by or execution.deadline) and (late := too_late(execution)):
            await self._too_late(execution, late)
            return
        definition = self.definitions.known(execution)
        if definition is None:
            definition = await self.definitions.get(execution)
            if definition is None:
                gone = RunOutcome(ok=False, kind="permanent", message="the definition is gone")
                self._report(execution, None, gone, started)
                return
        ctx = job_context(
            execution.execution_id,
            execution.attempt_count,
            token,
            execution.definition_uri,
            execution.definition_version,
            AttemptState(execution.checkpoint, cancel_grace=self.cancel_grace),
        )
        # The first heartbeat is due a third of a lease from now; most attempts are over long
        # before, so a task is started only for attempts that outlive it (engine/heartbeat.py).
        this = asyncio.current_task()
        assert this is not None
        self.heartbeats.schedule(execution, token, this, ctx.state)
        outcome: RunOutcome | None = None
        try:
            outcome = await run_attempt(
                definition,
                execution.inputs,
                ctx,
                runners=self.runners,
                trace_context=execution.trace_context,  # the claim returns the whole row
            )
        except asyncio.CancelledError:
            lost = self.heartbeats.take_lost(execution.execution_id)
            if not lost and not ctx.cancelled:
                raise  # shutdown cancelled us: the caller releases the execution
            this.uncancel()
            if lost:
                self._stale(execution, "the lease was lost while the handler ran")
                return
        finally:
            self.heartbeats.stop(execution.execution_id)
        if outcome is None or (ctx.cancelled and not outcome.ok):
            self._report_cancelled(execution, started)
            return
        if not outcome.ok and ctx.state.has_pending:
            # The checkpoint must outlive the failure (or the snooze): the next attempt starts
            # from it. One write, only when something is waiting.
            await self.heartbeats.beat_once(execution, token, ctx.state)
        if outcome.snooze is not None:
            await self._snooze(execution, outcome)
            return
        self._report(execution, definition, outcome, started)

    async def _snooze(self, execution: Execution, outcome: RunOutcome) -> None:
        try:
            done = await cancellation.snooze(
                self.store, execution, outcome, self.clock.now(), self.store_now()
            )
        except Exception as exc:  # the lease expires and the reaper retries it: at least once
            self.log.warning("snooze not recorded: %s", exc)
            return
        if not done:
            self._stale(execution, "the snooze came with a stale fencing token")

    async def _too_late(self, execution: Execution, late: TooLate) -> None:
        """Claimed after its startBy or deadline (engine/deadlines.py): not run."""
        if late is TooLate.DEADLINE:
            return self.results.add(Finished(execution, deadline_result(execution), 0.0))
        if not await expire_claimed(self.store, execution, self.store_now()):
            self._stale(execution, "the expiry came with a stale fencing token")

    def _report_cancelled(self, execution: Execution, started: datetime) -> None:
        result = cancellation.cancelled_result(execution, execution.cancel_requested_at)
        seconds = (self.clock.now() - started).total_seconds()
        self.results.add(Finished(execution, result, seconds))

    def _report(
        self,
        execution: Execution,
        definition: Definition | None,
        outcome: RunOutcome,
        started: datetime,
    ) -> None:
        ended = self.clock.now()
        result = attempt_result(
            execution,
            definition,
            outcome,
            max_inline_output=self.max_inline_output,
            now=ended,
            uniform=self.uniform,
        )
        seconds = (ended - started).total_seconds()
        breaker = definition.circuit_breaker if definition is not None else None
        self.results.add(Finished(execution, result, seconds, breaker))

    def _stale(self, execution: Execution, why: str) -> None:
        self.stale_writes += 1
        self.metrics.stale_fencing.inc()
        self.log.warning(
            "%s: result of attempt %d dropped (fencing token %s)",
            why,
            execution.attempt_count,
            execution.fencing_token,
            extra=execution_fields(execution, self.worker_id),
        )
