"""The worker's side of circuit breakers (issue 14, ``domain/breaker.py``): each reported attempt
of a definition that configures ``circuitBreaker`` is counted by its tenant's breaker.

Off the hot path: an attempt whose definition has no breaker costs one ``is None`` check in
``Worker._report``. The others are counted after their result committed (a stale result counts
for nothing), one store transaction each, in order, by a task of their own so that a slow count
never holds up the next claim. Counting is advice, not a guarantee: a count lost to a crash or a
database error leaves the breaker as it was (logged), never an execution."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from tickwheel.domain.states import AttemptStatus
from tickwheel.engine.reporting import Finished
from tickwheel.observability.metrics import Metrics
from tickwheel.store.flow_protocol import FlowStore

COUNTED = {
    AttemptStatus.SUCCEEDED: False,
    AttemptStatus.FAILED: True,
    AttemptStatus.TIMED_OUT: True,
}
"""Which attempt outcomes a breaker counts, and whether as a failure. Cancelled and snoozed
attempts say nothing about the dependency."""


class BreakerCounts:
    def __init__(
        self,
        store: FlowStore,
        *,
        now: Callable[[], datetime],
        metrics: Callable[[], Metrics],
        log: logging.Logger,
    ) -> None:
        self.store = store
        self._now = now
        self._metrics = metrics
        self._log = log
        self._waiting: list[Finished] = []
        self._task: asyncio.Task[None] | None = None

    def add(self, item: Finished) -> None:
        if item.breaker is None or item.result.attempt_status not in COUNTED:
            return
        self._waiting.append(item)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._count(), name="worker-breakers")

    async def flush(self) -> None:
        """Returns once every attempt added so far is counted (or its count given up)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def _count(self) -> None:
        while self._waiting:
            item = self._waiting.pop(0)
            execution, config = item.execution, item.breaker
            assert config is not None
            try:
                transition = await self.store.circuit_breaker_record(
                    execution.tenant,
                    execution.definition_uri,
                    config,
                    execution.execution_id,
                    COUNTED[item.result.attempt_status],
                    self._now(),
                )
            except Exception as exc:
                self._log.warning(
                    "circuit breaker of %s: attempt not counted: %s", execution.definition_uri, exc
                )
                continue
            if transition is not None:
                self._metrics().breaker_transition(
                    execution.definition_uri, str(transition.to_state)
                )
                self._log.warning(
                    "circuit breaker of %s (tenant %s): %s -> %s: %s",
                    execution.definition_uri,
                    execution.tenant,
                    transition.from_state,
                    transition.to_state,
                    transition.reason,
                )
