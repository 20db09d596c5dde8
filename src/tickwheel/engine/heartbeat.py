"""The heartbeats of a worker's running attempts: they renew each lease, carry the handler's
progress and checkpoint, and bring back a cancel request or the news that the lease is lost.

Most attempts end long before their first beat is due (a third of a lease), so a beat starts as
a timer and becomes a task only for an attempt that outlives it. A lost lease is remembered here
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

    @property
    def interval(self) -> float:
        return max(self.lease.total_seconds() / 3, 0.05)

    def schedule(
        self, execution: Execution, token: int, attempt: asyncio.Task[None], state: AttemptState
    ) -> asyncio.TimerHandle:
        """The first beat, a third of a lease from now; cancel the handle (and ``stop``) when
        the attempt ends."""
        return asyncio.get_running_loop().call_later(
            self.interval, self._start, execution, token, attempt, state
        )

    def stop(self, execution_id: uuid.UUID) -> None:
        heartbeat = self._beats.pop(execution_id, None)
        if heartbeat is not None:
            heartbeat.cancel()

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
