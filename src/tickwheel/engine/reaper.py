"""The reaper: finds RUNNING executions whose lease expired (their worker died, hung or was
partitioned away), marks the attempt ABANDONED and applies the retry policy.

The whole batch is one conditional update, each row guarded twice: by the fencing token it read
(another reaper got there first -> nothing happens) and by the lease still being expired (a
heartbeat that arrived meanwhile wins). Several reapers may run at once."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from datetime import timedelta

from tickwheel.domain.backoff import Uniform
from tickwheel.domain.clock import Clock
from tickwheel.domain.definition_refs import stored_name
from tickwheel.domain.definitions import Definition, RetryPolicy
from tickwheel.domain.models import Execution
from tickwheel.domain.retry import decide_lost, within_deadline
from tickwheel.domain.states import ExecutionStatus
from tickwheel.engine.service import Service
from tickwheel.observability.logs import execution_fields
from tickwheel.services.settings import ReaperSettings
from tickwheel.store.protocol import AttemptResult, ReaperStore


class Reaper(Service):
    name = "reaper"

    def __init__(
        self,
        store: ReaperStore,
        clock: Clock | None = None,
        *,
        uniform: Uniform = random.uniform,
        settings: ReaperSettings = ReaperSettings(),
        runs: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(clock)
        self.store = store
        self.batch = settings.batch
        self.interval = settings.interval
        self.max_wait = settings.max_wait
        self._wait = settings.interval  # the next idle pause, set by the last round
        self.uniform = uniform
        self.reaped = 0
        self.runs = runs
        """Whether to run now (None: always): beside a leased scheduler, its ``runs_passes``,
        so that one process of several reaps."""
        self._definitions: dict[tuple[str, str, int], Definition | None] = {}

    async def run_once(self) -> int:
        """Decides every expired execution of the batch, then writes them all in one
        conditional update; the ones that renewed their lease meanwhile are left alone.

        A lost attempt is judged apart from the handler's own failures (domain/retry.py): the
        worker died, most often of a neighbour's doing, so the execution is retried without
        spending ``maxAttempts``, up to ``maxLostAttempts`` losses."""
        self._wait = self.interval
        if self.runs is not None and not self.runs():
            return 0
        # First when the earliest lease ends: the reaper sleeps until then (within its bounds)
        # instead of asking for expired leases every second, nearly always of nothing.
        ends_in = await self.store.execution_lease_next(self.store_now())
        if ends_in is None or ends_in > timedelta(0):
            seconds = self.max_wait if ends_in is None else ends_in.total_seconds()
            self._wait = min(max(seconds, self.interval), self.max_wait)
            return 0
        expired = await self.store.execution_lease_expired(self.batch, self.store_now())
        if not expired:
            return 0
        lost_before = await self.store.attempt_count_lost([e.execution_id for e in expired])
        results: dict[uuid.UUID, tuple[Execution, AttemptResult]] = {}
        for execution in expired:
            assert execution.fencing_token is not None
            definition = await self._definition(
                execution.tenant, execution.definition_uri, execution.definition_version
            )
            policy = definition.retry if definition else RetryPolicy(max_attempts=1)
            lost = lost_before.get(execution.execution_id, 0) + 1  # this one too
            decision = within_deadline(
                decide_lost(lost, policy, self.clock.now(), self.uniform), execution.deadline
            )
            message = f"the lease of worker {execution.lease_owner} expired"
            if decision.reason:
                message += f"; {decision.reason}"
            status = decision.execution_status
            if execution.cancel_requested_at is not None:
                # A cancel was asked before the worker died: it ends, it is not retried.
                status, message = ExecutionStatus.CANCELLED, message + "; a cancel was requested"
            results[execution.execution_id] = (
                execution,
                AttemptResult(
                    execution.execution_id,
                    execution.fencing_token,
                    decision.attempt_status,
                    status,
                    error={
                        "kind": "lost",
                        "message": message,
                        "attempt": execution.attempt_count,
                        "lostAttempts": lost,
                    },
                    next_attempt_at=None
                    if status is ExecutionStatus.CANCELLED
                    else decision.next_attempt_at,
                    lease_expired_only=True,
                ),
            )
        if not results:
            return 0
        reaped = await self.store.execution_reap(
            [result for _, result in results.values()], self.store_now()
        )
        for execution_id in reaped:
            execution, result = results[execution_id]
            self.metrics.reaped(execution.definition_uri, str(result.execution_status))
            self.log.warning(
                "attempt %d abandoned: lease of %s expired (lost attempt %s); execution %s",
                execution.attempt_count,
                execution.lease_owner,
                (result.error or {}).get("lostAttempts"),
                result.execution_status,
                extra=execution_fields(execution, execution.lease_owner),
            )
        self.reaped += len(reaped)
        return len(reaped)

    async def idle(self, did: int) -> None:
        await self.pause(0.0 if did >= self.batch else self._wait)

    async def _definition(self, tenant: str, uri: str, version: int) -> Definition | None:
        """The retry policy's source, resolved for the execution's tenant like the worker's."""
        key = (tenant, uri, version)
        if key not in self._definitions:
            stored = await self.store.definition_get(tenant, stored_name(uri), version)
            self._definitions[key] = stored.definition if stored else None
        return self._definitions[key]
