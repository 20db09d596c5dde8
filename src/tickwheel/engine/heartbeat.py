"""The heartbeats of a worker's running attempts: they renew each lease, carry the handler's
progress and checkpoint, and bring back a cancel request or the news that the lease is lost.

Most attempts end long before their first beat is due (a third of a lease), so a beat becomes a
task only for an attempt that outlives it. Until then the attempt waits in a dict with when its
first beat is due, and one timer, set for the earliest of them, serves them all: an attempt costs
a dict entry, not a timer of its own to schedule and cancel. A lost lease is remembered here
until the attempt's task, cancelled by the beat, sees it and drops its result."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from tickwheel.domain.models import Execution
from tickwheel.engine import cancellation
from tickwheel.engine.runners.attempt_state import AttemptState
from tickwheel.store.protocol import Topic, WorkerStore

_Waiting = tuple[float, Execution, int, "asyncio.Task[None]", AttemptState]
"""An attempt whose first beat is not due yet: when it is due (loop time), and what it needs."""


class Heartbeats:
    def __init__(
        self,
        store: WorkerStore,
        lease: timedelta,
        *,
        now: Callable[[], datetime | None],
        log: logging.Logger,
    ) -> None:
        self.store = store
        self.lease = lease
        self._now = now
        self._log = log
        self._beats: dict[uuid.UUID, asyncio.Task[None]] = {}
        self._lost: set[uuid.UUID] = set()
        # Attempts whose first beat is not due yet.
        self._waiting: dict[uuid.UUID, _Waiting] = {}
        self._timer: asyncio.TimerHandle | None = None

    @property
    def interval(self) -> float:
        return max(self.lease.total_seconds() / 3, 0.05)

    def schedule(
        self, execution: Execution, token: int, attempt: asyncio.Task[None], state: AttemptState
    ) -> None:
        """The first beat, a third of a lease from now; ``stop`` when the attempt ends."""
        loop = asyncio.get_running_loop()
        due = loop.time() + self.interval
        self._waiting[execution.execution_id] = (due, execution, token, attempt, state)
        # The timer is never later than the earliest due time.
        timer = self._timer
        if timer is None or due < timer.when():
            if timer is not None:
                timer.cancel()
            self._timer = loop.call_at(due, self._due)

    def stop(self, execution_id: uuid.UUID) -> None:
        if self._waiting.pop(execution_id, None) is not None:
            return  # no beat was started
        heartbeat = self._beats.pop(execution_id, None)
        if heartbeat is not None:
            heartbeat.cancel()

    def _due(self) -> None:
        """Starts the beat of every waiting attempt that is due, and sets the timer for the
        next one (if any). A walk over the waiting attempts (at most the worker's slots), about
        once per interval: the timer is set for the earliest of them."""
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        waiting = self._waiting
        due = [key for key, entry in waiting.items() if entry[0] <= now]
        for execution_id in due:
            _, execution, token, attempt, state = waiting.pop(execution_id)
            self._start(execution, token, attempt, state)
        if waiting:
            self._timer = loop.call_at(min(entry[0] for entry in waiting.values()), self._due)

    def take_lost(self, execution_id: uuid.UUID) -> bool:
        """Whether the attempt was cancelled because its lease was lost (forgotten once told)."""
        if execution_id in self._lost:
            self._lost.discard(execution_id)
            return True
        return False

    def _start(
        self, execution: Execution, token: int, attempt: asyncio.Task[None], state: AttemptState
    ) -> None:
        self._beats[execution.execution_id] = asyncio.create_task(
            self._beat(execution, token, attempt, state)
        )

    async def _beat(
        self, execution: Execution, token: int, attempt: asyncio.Task[None], state: AttemptState
    ) -> None:
        while not attempt.done():
            try:
                answer = await cancellation.beat(
                    self.store, execution, token, self.lease, self._now(), state
                )
            except Exception as exc:
                # The lease runs on; the next beat may get through before it expires.
                self._log.warning("heartbeat failed: %s", exc)
            else:
                if answer is None:
                    # Someone else owns the execution now: stop, drop whatever the handler makes.
                    self._lost.add(execution.execution_id)
                    attempt.cancel()
                    return
                if answer.cancel_requested and not state.cancelled:
                    state.cancel()  # before the task's cancel: the runners read it as they stop
                    attempt.cancel()
            # A cancel requested anywhere wakes the beat early (cancels are rare; a wasted
            # beat is one short UPDATE): it is heard at once rather than a third of a lease on.
            await self.store.wait_for(Topic.CANCEL, self.interval)

    async def beat_once(self, execution: Execution, token: int, state: AttemptState) -> None:
        """One beat now, for a checkpoint that must outlive a failure; a failure is logged."""
        try:
            await cancellation.beat(self.store, execution, token, self.lease, self._now(), state)
        except Exception as exc:
            self._log.warning("checkpoint not written: %s", exc)
