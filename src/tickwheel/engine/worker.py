"""The worker: claims READY executions, runs each attempt, reports the outcome under its fencing
token.

No lock is held while a handler runs: the claim is one short transaction, and from then on the
worker proves it still owns the execution with the fencing token on every write. A heartbeat
renews the lease; if the token is no longer current (the lease expired and the reaper or another
worker moved on) the attempt is abandoned and its result dropped — a zombie never commits.

Throughput comes from batching both ends. Claims: up to every free slot in one round trip, and
while more work is queued the worker waits for a few slots to free up (``low_water``) rather
than claiming one execution at a time. Completions: a finished attempt frees its slot at once and
its result waits in a buffer, reported with others in one transaction when ``finish_batch``
results are waiting or ``finish_interval`` seconds after the first, and at drain and shutdown.
A result not yet reported is not acknowledged: if the worker dies first, the lease expires and
the reaper treats the attempt as lost, exactly as for a worker killed while its handler ran (a
retry under the retry policy). Delivery stays at least once: the buffer only widens the window,
by at most ``finish_interval`` plus one report, between a handler's side effect and its report."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence

from tickwheel.domain.backoff import Uniform
from tickwheel.domain.clock import Clock
from tickwheel.domain.models import Execution
from tickwheel.engine.attempt import Attempts
from tickwheel.engine.breakers import BreakerCounts
from tickwheel.engine.definition_cache import DefinitionCache
from tickwheel.engine.heartbeat import Heartbeats
from tickwheel.engine.reporting import Finished, ResultBuffer, record_finished
from tickwheel.engine.runners import Runner, default_runners
from tickwheel.engine.service import Service
from tickwheel.observability.logs import execution_fields
from tickwheel.services.settings import WorkerSettings
from tickwheel.store.due import DefinitionKey
from tickwheel.store.engine_protocol import RELEASED_AT_SHUTDOWN, RELEASED_UNSTARTED, retry_after
from tickwheel.store.protocol import Topic, WorkerStore

REPORT_EVERY = 5.0
"""Seconds between a worker's reports to the registry (one upsert each, never one per claim)."""
ALIVE_WITHIN = 3 * REPORT_EVERY
"""A worker is alive while its last report is at most this old: two missed reports tolerated."""

SETTLE_TURNS = 4
"""Event-loop turns a worker with queued work gives finishing attempts before it claims."""
AHEAD_SHORT = 0.05
"""Seconds an attempt may last and count as short. A worker claims ahead only while its last
``concurrency`` attempts were all short (``WorkerSettings.claim_ahead``)."""
RATE_SLACK = 0.002
"""Seconds past a rate limit's next token that a worker claims again: the token is there by
then whatever the rounding of the clocks."""


class Worker(Service, Attempts):
    name = "worker"

    def __init__(
        self,
        store: WorkerStore,
        clock: Clock | None = None,
        *,
        worker_id: str | None = None,
        runners: Mapping[str, Runner] | None = None,
        uniform: Uniform = random.uniform,
        definition_uris: Sequence[str] | None = None,
        settings: WorkerSettings = WorkerSettings(),
    ) -> None:
        super().__init__(clock, owner=worker_id)
        concurrency, low_water = settings.concurrency, settings.low_water
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.store = store
        self.worker_id = self.owner  # the base's owner id: host, pid and a random tail
        self.concurrency = concurrency
        self.lease = settings.lease
        # Job threads for every slot plus as many again for sync jobs stuck past their timeout;
        # once those spares are used up, each further stuck thread takes a slot out of service.
        self.runners = runners or default_runners(max_threads=2 * concurrency)
        # The runners that can leave threads stuck (the python runner): read on every claim.
        self._stuck_counters = [r for r in self.runners.values() if hasattr(r, "stuck_threads")]
        self.uniform = uniform
        self.poll = settings.poll
        self.heard_poll = settings.heard_poll
        self.definition_uris = list(definition_uris) if definition_uris is not None else None
        self.max_inline_output = settings.max_inline_output
        self.cancel_grace = settings.cancel_grace
        self.running: dict[uuid.UUID, tuple[asyncio.Task[None], int]] = {}
        # Claimed ahead, not started yet, with when each was claimed (time.monotonic).
        self.waiting: deque[tuple[Execution, float]] = deque()
        self.claim_ahead = settings.claim_ahead
        if settings.ahead_batches < 1:
            raise ValueError("ahead_batches must be at least 1")
        self.ahead = settings.ahead_batches * concurrency
        self._began: dict[uuid.UUID, float] = {}
        self._short_run = 0  # attempts in a row that were short
        self._held_check: asyncio.TimerHandle | None = None
        self._releasing: set[asyncio.Task[int]] = set()
        self.definitions = DefinitionCache(store)
        self.stale_writes = 0
        self.finished = 0
        self.report_every = REPORT_EVERY
        self._reported_at: float | None = None
        # While more work is queued, claim once this many slots are free (a quarter by default)
        # or once ``claim_wait`` seconds passed since the first slot freed up.
        self.low_water = min(concurrency, low_water or max(1, concurrency // 4))
        self.claim_wait = settings.claim_wait
        # The last claim came back short (or none was made yet): claim for any free slot, and
        # wait for a READY signal rather than for slots.
        self._queue_empty = True
        # Seconds until a rate limit that held work back has a token again (None: none did).
        self._retry_after: float | None = None
        self._slots_wanted = 1
        self._slots_free: asyncio.Future[None] | None = None
        # The claim in flight: done once it came back and its executions started (claim_back).
        self._claimed: asyncio.Future[None] | None = None
        self.results = ResultBuffer(
            store,
            batch=settings.finish_batch,
            interval=settings.finish_interval,
            now=self.store_now,
            recorded=self._recorded,
            stale=lambda item: self._stale(
                item.execution, "the result came with a stale fencing token"
            ),
            stopping=lambda: self.stopping,
            log=self.log,
        )
        self.heartbeats = Heartbeats(store, self.lease, now=self.store_now, log=self.log)
        self.breakers = BreakerCounts(
            store, now=self.clock.now, metrics=lambda: self.metrics, log=self.log
        )

    def prefetch_definitions(self, keys: Collection[DefinitionKey]) -> None:
        """Reads ahead the definitions of executions due soon (a scheduler of this process
        loaded them into its wheel), those this worker may claim; no wait."""
        if self.stopping:
            return
        if self.definition_uris is not None:
            keys = [k for k in keys if k[1] in self.definition_uris]
        self.definitions.warm(keys)

    # -- claiming -------------------------------------------------------------------------------

    @property
    def stuck_threads(self) -> int:
        stuck = 0
        for runner in self._stuck_counters:
            stuck += runner.stuck_threads
        return stuck

    @property
    def blocked_slots(self) -> int:
        """Slots lost to stuck threads beyond the spare threads of the pool."""
        return max(0, self.stuck_threads - self.concurrency)

    @property
    def free_slots(self) -> int:
        return self.concurrency - len(self.running) - self.blocked_slots

    def _claimable(self) -> int:
        """How many a claim may take now: the free slots, and while attempts are short
        ``ahead_batches`` batches ahead, less what waits already.

        Claiming ahead hides the claim's round trip behind the batch that runs: a claim sent
        when slots are free finds its batch's attempts done during its own round trip (a no-op
        takes microseconds), and the worker then waits on the database with nothing to run.
        Only short attempts are claimed ahead of (``AHEAD_SHORT``): an execution claimed ahead
        waits for a slot with its lease running and no heartbeat, so it must not wait long; one
        that waits a third of a lease anyway is released (``_check_held``). One batch ahead was
        not enough: it ran out in a millisecond, long before the next claim came back, so the
        worker waited on every claim; with four in hand, claims are larger and fewer, and each
        goes out while some of the last one's attempts still run."""
        ahead = self.ahead if self._ahead_ok() else 0
        return self.free_slots + ahead - len(self.waiting)

    def _ahead_ok(self) -> bool:
        """The last ``concurrency`` attempts were short, and so far is every one running (the
        oldest is first in ``_began``)."""
        if not self.claim_ahead or self._short_run < self.concurrency:
            return False
        oldest = next(iter(self._began.values()), None)
        return oldest is None or time.monotonic() - oldest <= AHEAD_SHORT

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

    def _report_in(self) -> float:
        """Seconds until the registry report is due (run_once sends it)."""
        if self._reported_at is None:
            return 0.0
        return self._reported_at + self.report_every - time.monotonic()

    async def run_once(self) -> int:
        # run_once comes round at least every ``poll`` seconds (idle waits are bounded, and a
        # long one ends when the report is due), so the report needs no task of its own.
        due = self._reported_at is None or time.monotonic() - self._reported_at >= self.report_every
        reporting = due and not self.stopping
        free = self._claimable()
        if free <= 0 or self.stopping:
            if reporting:
                await self.report()
            return 0
        claimed = self._claimed = asyncio.get_running_loop().create_future()
        try:
            return await self._claim(free, reporting)
        finally:
            self._claimed = None
            claimed.set_result(None)

    async def claim_back(self, limit: float) -> None:
        """Waits, at most ``limit`` seconds, until the claim in flight (if any) has come back
        and its executions have started; never cancels it. For a scheduler of this process
        before an instant's next promotions (``Scheduler.claim_back``)."""
        claimed = self._claimed
        if claimed is not None:
            await asyncio.wait([claimed], timeout=limit)

    async def _claim(self, free: int, reporting: bool) -> int:
        claim = self.store.execution_claim_ready(
            self.worker_id, free, self.lease, self.store_now(), self.definition_uris
        )
        if reporting:
            # The claim goes out beside the report, each on a connection of its own, instead of
            # after its round trip (a start's first claim above all). The report is still sent
            # first, in this step, so that the registry is written before the other services'
            # first queries (a gauge of live workers), and the round ends with both done.
            claiming = asyncio.ensure_future(claim)
            try:
                await self.report()
            except BaseException:
                claiming.cancel()
                raise
            claimed = await claiming
        else:
            claimed = await claim
        self._queue_empty = len(claimed) < free
        self._retry_after = retry_after(claimed)
        debug = self.log.isEnabledFor(logging.DEBUG)
        # The free slots, counted once: each start below takes one, and nothing else frees or
        # takes one until this loop returns to the event loop.
        slots = self.free_slots
        started_metric = self.metrics.started
        for execution in claimed:
            assert execution.fencing_token is not None
            started = execution.started_at or self.clock.now()
            late = (started - execution.execute_at).total_seconds()
            started_metric(execution.definition_uri, execution.attempt_count, late)
            if debug:
                self.log.debug("claimed", extra=execution_fields(execution, self.worker_id))
            if slots > 0 and not self.waiting:
                self._start(execution)
                slots -= 1
            else:
                self._hold(execution)
        return len(claimed)

    def _start(self, execution: Execution) -> None:
        assert execution.fencing_token is not None
        # Unnamed: a name per task (``attempt-<id>``) cost a uuid's formatting per attempt;
        # the attempt's log lines name the execution (bind_execution).
        task = asyncio.create_task(self._attempt(execution))
        self.running[execution.execution_id] = (task, execution.fencing_token)
        self._began[execution.execution_id] = time.monotonic()
        task.add_done_callback(self._forget(execution.execution_id))

    def _forget(self, execution_id: uuid.UUID) -> Callable[[asyncio.Task[None]], None]:
        def done(_: asyncio.Task[None]) -> None:
            self.running.pop(execution_id, None)
            began = self._began.pop(execution_id, None)
            if began is not None:
                short = time.monotonic() - began <= AHEAD_SHORT
                self._short_run = self._short_run + 1 if short else 0
            # What was claimed ahead takes the slot at once, not at the next round.
            while self.waiting and self.free_slots > 0 and not self.stopping:
                self._start(self.waiting.popleft()[0])
            waiter = self._slots_free
            if waiter is not None and not waiter.done() and self._claimable() >= self._slots_wanted:
                waiter.set_result(None)

        return done

    def _hold(self, execution: Execution) -> None:
        """Keeps an execution claimed ahead until a slot frees up."""
        self.waiting.append((execution, time.monotonic()))
        if self._held_check is None:
            self._held_check = asyncio.get_running_loop().call_later(
                self._hold_limit, self._check_held
            )

    @property
    def _hold_limit(self) -> float:
        return self.lease.total_seconds() / 3

    def _check_held(self) -> None:
        """Releases (back to READY, no attempt burnt) what waited a third of a lease for a
        slot: the attempts ahead of it turned out long, and its lease has no heartbeat."""
        self._held_check = None
        limit = time.monotonic() - self._hold_limit
        stale: list[Execution] = []
        while self.waiting and self.waiting[0][1] <= limit:
            stale.append(self.waiting.popleft()[0])
        if stale:
            task = asyncio.ensure_future(self._release(stale, RELEASED_UNSTARTED))
            self._releasing.add(task)
            task.add_done_callback(self._releasing.discard)
        if self.waiting:
            delay = self.waiting[0][1] + self._hold_limit - time.monotonic()
            self._held_check = asyncio.get_running_loop().call_later(
                max(0.0, delay), self._check_held
            )

    async def _release(self, executions: Sequence[Execution], why: str) -> int:
        released = 0
        for execution in executions:
            assert execution.fencing_token is not None
            try:
                if await self.store.execution_release(
                    execution.execution_id, execution.fencing_token, self.store_now(), why
                ):
                    released += 1
            except Exception as exc:  # its lease expires and the reaper takes it back
                self.log.warning("an execution claimed ahead was not released: %s", exc)
        return released

    async def idle(self, did: int) -> None:
        if self.stopping:
            return
        if self._queue_empty:
            if self._claimable() > 0:
                await self._wait_for_work()
            else:
                await self._wait_for_slots(1, self.poll)
            return
        # More work is queued. A claim per freed slot would cost a round trip per execution:
        # wait for a slot, then briefly for ``low_water`` of them, and claim them together.
        if self._claimable() <= 0:
            await self._wait_for_slots(1, self.poll)
        if 0 < self._claimable() < self.low_water:
            await self._wait_for_slots(self.low_water, self.claim_wait)
        await self._settle()

    async def _settle(self) -> None:
        """Lets attempts that are finishing right now free their slots before the next claim.

        The attempts of the last claim were only created, not run, when it returned; a claim
        sent at once counts their slots as taken, and they finish during its round trip. Short
        jobs then alternate small and large claims (2, 8, 2, 8 of 10 slots: twice the claims).
        A few turns of the event loop (a task's step, then its done callback) cost microseconds
        and let every attempt that needs no real wait finish first; a long attempt is not waited
        for (the turns end at once when no attempt runs)."""
        for _ in range(SETTLE_TURNS):
            if not self.running or self.stopping:
                return
            await asyncio.sleep(0)

    async def _wait_for_work(self) -> None:
        """Nothing more to take: sleeps until work becomes READY (LISTEN/NOTIFY on PostgreSQL,
        in-process events on SQLite), polling at most every ``poll`` seconds, or until stopped.
        Work held back by an empty rate-limit bucket is claimable when its next token comes: the
        claim said when, and the sleep ends then (one claim per token, not a poll loop)."""
        timeout = self.poll
        if self.store.hears_all():
            # A long wait, but the registry report still goes out on time (run_once sends it).
            timeout = max(timeout, min(self.heard_poll, self._report_in()))
        if self._retry_after is not None:
            timeout = min(timeout, self._retry_after + RATE_SLACK)
        await self.wait_or_stop(self.store.wait_for(Topic.READY, timeout))

    async def _wait_for_slots(self, wanted: int, timeout: float) -> None:
        if not self.running:  # every slot is held by a stuck thread: only time frees them
            await self.pause(timeout)
            return
        self._slots_wanted = wanted
        self._slots_free = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait([self._slots_free], timeout=timeout)
        finally:
            self._slots_free = None

    async def drain(self) -> None:
        """Waits for every attempt in flight and reports every result (tests; shutdown)."""
        while self.running or self.waiting:
            while self.waiting and self.free_slots > 0:
                self._start(self.waiting.popleft()[0])
            if not self.running:
                break  # every slot is held by a stuck thread
            await asyncio.gather(*(task for task, _ in list(self.running.values())))
        await self.flush()

    async def shutdown(self, grace: float) -> int:
        """Stops claiming, lets running attempts finish for ``grace`` seconds, reports every
        finished attempt, then cancels the rest and releases them to READY without burning an
        attempt. Returns how many it released."""
        self.stop()
        held = [execution for execution, _ in self.waiting]
        self.waiting.clear()
        if self._held_check is not None:
            self._held_check.cancel()
            self._held_check = None
        pending = [task for task, _ in self.running.values()]
        if pending:
            await asyncio.wait(pending, timeout=grace)
        left = dict(self.running)
        for task, _ in left.values():
            task.cancel()
        await asyncio.gather(*(task for task, _ in left.values()), return_exceptions=True)
        await self.flush()
        released = await self._release(held, RELEASED_AT_SHUTDOWN)
        if self._releasing:
            await asyncio.gather(*self._releasing, return_exceptions=True)
        for execution_id, (_, token) in left.items():
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

    # -- reporting finished attempts ------------------------------------------------------------

    async def flush(self) -> None:
        """Reports every finished attempt still in the buffer."""
        await self.results.flush()
        await self.breakers.flush()

    def _recorded(self, item: Finished) -> None:
        self.finished += 1
        record_finished(item, self.metrics, self.log, self.worker_id)
        if item.breaker is not None:
            self.breakers.add(item)
