"""The worker: claims READY executions, runs each attempt, reports the outcome under its fencing
token.

No lock is held while a handler runs: the claim is one short transaction, and from then on the
worker proves it still owns the execution with the fencing token on every write. A heartbeat
renews the lease; if the token is no longer current (the lease expired and the reaper or another
worker moved on) the attempt is abandoned and its result dropped — a zombie never commits."""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from tickwheel.domain.backoff import Uniform
from tickwheel.domain.clock import Clock
from tickwheel.domain.definitions import Definition, RetryPolicy
from tickwheel.domain.models import Execution
from tickwheel.domain.retry import decide_failure
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.engine.runners import JobContext, Runner, RunOutcome, default_runners, run_attempt
from tickwheel.engine.service import Service
from tickwheel.observability.logs import bind, execution_fields
from tickwheel.store.protocol import AttemptResult, Store, Topic

REPORT_EVERY = 5.0
"""Seconds between a worker's reports to the registry (one upsert each, never one per claim)."""
ALIVE_WITHIN = 3 * REPORT_EVERY
"""A worker is alive while its last report is at most this old: two missed reports tolerated."""

# When a definition cannot be found, the failure is permanent: nothing to retry with.
_NO_RETRY = RetryPolicy(max_attempts=1)


def output_reference(execution_id: uuid.UUID) -> str:
    """Where an output kept out of line is read: ``GET /v1/executions/{id}/output``."""
    return f"tickwheel://executions/{execution_id}/output"


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Worker(Service):
    name = "worker"

    def __init__(
        self,
        store: Store,
        clock: Clock | None = None,
        *,
        worker_id: str | None = None,
        concurrency: int = 4,
        lease: timedelta = timedelta(seconds=30),
        runners: Mapping[str, Runner] | None = None,
        uniform: Uniform = random.uniform,
        poll: float = 1.0,
        definition_uris: Sequence[str] | None = None,
        max_inline_output: int = 64 * 1024,
    ) -> None:
        super().__init__(clock)
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.store = store
        self.worker_id = worker_id or default_worker_id()
        self.concurrency = concurrency
        self.lease = lease
        # Job threads for every slot plus as many again for sync jobs stuck past their timeout;
        # once those spares are used up, each further stuck thread takes a slot out of service.
        self.runners = runners or default_runners(max_threads=2 * concurrency)
        self.uniform = uniform
        self.poll = poll
        self.definition_uris = list(definition_uris) if definition_uris is not None else None
        self.max_inline_output = max_inline_output
        self.running: dict[uuid.UUID, tuple[asyncio.Task[None], int]] = {}
        self._definitions: dict[tuple[str, int], Definition] = {}
        self.stale_writes = 0
        self.finished = 0
        self.report_every = REPORT_EVERY
        self._reported_at: float | None = None

    # -- claiming -------------------------------------------------------------------------------

    @property
    def stuck_threads(self) -> int:
        return sum(getattr(runner, "stuck_threads", 0) for runner in self.runners.values())

    @property
    def blocked_slots(self) -> int:
        """Slots lost to stuck threads beyond the spare threads of the pool."""
        return max(0, self.stuck_threads - self.concurrency)

    async def report(self) -> None:
        """Tells the registry this worker is up and how busy it is. A failed report is logged,
        never raised: claiming must go on even when the registry write does not."""
        self._reported_at = time.monotonic()
        try:
            await self.store.worker_heartbeat(
                self.worker_id,
                socket.gethostname(),
                os.getpid(),
                self.concurrency,
                len(self.running),
                self.store_now(),
            )
        except Exception as exc:
            self.log.warning("worker registry report failed: %s", exc)

    async def run_once(self) -> int:
        # run_once comes round at least every ``poll`` seconds (idle waits are bounded), so the
        # report needs no task of its own.
        due = self._reported_at is None or time.monotonic() - self._reported_at >= self.report_every
        if due and not self.stopping:
            await self.report()
        free = self.concurrency - len(self.running) - self.blocked_slots
        if free <= 0 or self.stopping:
            return 0
        claimed = await self.store.execution_claim_ready(
            self.worker_id, free, self.lease, self.store_now(), self.definition_uris
        )
        for execution in claimed:
            assert execution.fencing_token is not None
            started = execution.started_at or self.clock.now()
            late = (started - execution.execute_at).total_seconds()
            self.metrics.started(execution.definition_uri, execution.attempt_count, late)
            self.log.debug("claimed", extra=execution_fields(execution, self.worker_id))
            task = asyncio.create_task(
                self._attempt(execution), name=f"attempt-{execution.execution_id}"
            )
            self.running[execution.execution_id] = (task, execution.fencing_token)
            task.add_done_callback(self._forget(execution.execution_id))
        return len(claimed)

    def _forget(self, execution_id: uuid.UUID) -> Callable[[asyncio.Task[None]], None]:
        def done(_: asyncio.Task[None]) -> None:
            self.running.pop(execution_id, None)

        return done

    async def idle(self, did: int) -> None:
        if self.stopping:
            return
        if len(self.running) + self.blocked_slots >= self.concurrency:
            # Full: wait for a slot, not for the database.
            tasks = [task for task, _ in self.running.values()]
            if tasks:
                await asyncio.wait(tasks, timeout=self.poll, return_when=asyncio.FIRST_COMPLETED)
            else:  # every slot is held by a stuck thread: only time frees them
                await self.pause(self.poll)
        elif not did:
            await self.store.wait_for(Topic.READY, self.poll)

    async def drain(self) -> None:
        """Waits for every attempt in flight (tests; graceful shutdown)."""
        while self.running:
            await asyncio.gather(*(task for task, _ in list(self.running.values())))

    async def shutdown(self, grace: float) -> int:
        """Stops claiming, lets running attempts finish for ``grace`` seconds, then cancels the
        rest and releases them to READY without burning an attempt. Returns how many it released."""
        self.stop()
        pending = [task for task, _ in self.running.values()]
        if pending:
            await asyncio.wait(pending, timeout=grace)
        left = dict(self.running)
        for task, _ in left.values():
            task.cancel()
        released = 0
        for execution_id, (task, token) in left.items():
            await asyncio.gather(task, return_exceptions=True)
            if await self.store.execution_release(execution_id, token, self.store_now()):
                released += 1
        if released:
            self.log.info("released %d executions at shutdown", released)
        for runner in self.runners.values():
            close = getattr(runner, "close", None)
            if callable(close):
                close()
        try:
            await self.store.worker_stopped(self.worker_id, self.store_now())
        except Exception as exc:
            self.log.warning("worker registry: stop not recorded: %s", exc)
        return released

    # -- one attempt ----------------------------------------------------------------------------

    async def _attempt(self, execution: Execution) -> None:
        token = execution.fencing_token
        assert token is not None
        # This task's own context: whatever is logged while the attempt runs (runners included)
        # names the execution, its attempt, token and this worker.
        bind(execution_fields(execution, self.worker_id))
        ctx = JobContext(
            execution_id=execution.execution_id,
            attempt=execution.attempt_count,
            fencing_token=token,
            definition_uri=execution.definition_uri,
            definition_version=execution.definition_version,
        )
        started = self.clock.now()
        definition = await self._definition(execution)
        if definition is None:
            outcome = RunOutcome(ok=False, kind="permanent", message="the definition is gone")
            await self._report(execution, None, outcome, started)
            return
        work = asyncio.create_task(
            run_attempt(definition, execution.inputs, ctx, runners=self.runners)
        )
        beat = asyncio.create_task(self._heartbeat(execution, token, work))
        try:
            outcome = await work
        except asyncio.CancelledError:
            if work.cancelled() and not beat.done():
                raise  # shutdown cancelled us: the caller releases the execution
            self._stale(execution, "the lease was lost while the handler ran")
            return
        finally:
            beat.cancel()
        await self._report(execution, definition, outcome, started)

    async def _heartbeat(self, execution: Execution, token: int, work: asyncio.Task[Any]) -> None:
        interval = max(self.lease.total_seconds() / 3, 0.05)
        while not work.done():
            await asyncio.sleep(interval)
            alive = await self.store.execution_heartbeat(
                execution.execution_id, token, self.lease, self.store_now()
            )
            if not alive:
                # Someone else owns the execution now: stop and drop whatever the handler makes.
                work.cancel()
                return

    async def _definition(self, execution: Execution) -> Definition | None:
        key = (execution.definition_uri, execution.definition_version)
        if key not in self._definitions:
            name = execution.definition_uri.rsplit("/", 1)[-1]
            stored = await self.store.definition_get(name, execution.definition_version)
            if stored is None:
                return None
            self._definitions[key] = stored.definition
        return self._definitions[key]

    async def _report(
        self,
        execution: Execution,
        definition: Definition | None,
        outcome: RunOutcome,
        started: datetime,
    ) -> None:
        token = execution.fencing_token
        assert token is not None
        if outcome.ok:
            size = len(json.dumps(outcome.output, separators=(",", ":")).encode())
            # A large output stays out of the hot executions row; the row keeps a reference.
            large = size > self.max_inline_output
            result = AttemptResult(
                execution.execution_id,
                token,
                AttemptStatus.SUCCEEDED,
                ExecutionStatus.SUCCEEDED,
                output=outcome.output,
                output_reference=output_reference(execution.execution_id) if large else None,
                output_size=size,
            )
        else:
            error = {**(outcome.error() or {}), "attempt": execution.attempt_count}
            decision = decide_failure(
                outcome.kind or "error",
                execution.attempt_count,
                execution.max_attempts,
                definition.retry if definition else _NO_RETRY,
                self.clock.now(),
                self.uniform,
            )
            result = AttemptResult(
                execution.execution_id,
                token,
                decision.attempt_status,
                decision.execution_status,
                error=error,
                next_attempt_at=decision.next_attempt_at,
            )
        if await self.store.attempt_finish(result, self.store_now()):
            self.finished += 1
            seconds = (self.clock.now() - started).total_seconds()
            self.metrics.finished(
                execution.definition_uri,
                str(result.execution_status),
                str(result.attempt_status),
                seconds,
            )
            self.log.debug(
                "attempt %d finished: %s",
                execution.attempt_count,
                result.attempt_status,
                extra=execution_fields(execution, self.worker_id),
            )
        else:
            self._stale(execution, "the result came with a stale fencing token")

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
