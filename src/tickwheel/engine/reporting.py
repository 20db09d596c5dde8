"""The worker's buffer of finished attempts: results are reported in batches, one transaction
each, instead of one transaction per attempt.

A batch goes out when ``batch`` results are waiting, or ``interval`` seconds after the first of
them arrived, or at once when someone flushes (drain, shutdown). Each result in it is still fenced
on its own by the store: a stale one is dropped and counted, the others commit.

A result in the buffer is not acknowledged. If the process dies first, the execution's lease
expires and the reaper treats the attempt as lost (a retry under the retry policy), as for a
worker killed while its handler ran: at least once, as between any side effect and its report.
While the database fails, the buffer keeps its results and tries again; results whose lease
expires meanwhile come back stale. Once the worker is stopping, a failed batch is
given up instead (logged with its size), so that shutdown cannot hang on a dead database."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple

from tickwheel.domain.breaker import BreakerConfig
from tickwheel.domain.models import Execution
from tickwheel.domain.states import AttemptStatus
from tickwheel.observability.logs import execution_fields
from tickwheel.observability.metrics import Metrics
from tickwheel.store.protocol import AttemptResult, ClaimStore

RETRY_SECONDS = 1.0
"""Seconds between tries to report a batch while the database fails."""


class Finished(NamedTuple):
    """A finished attempt waiting to be reported: its result, the execution it belongs to (for
    metrics and logs) and how long its handler ran. (A named tuple: one is made per attempt,
    and a frozen dataclass takes several times as long to build.)"""

    execution: Execution
    result: AttemptResult
    seconds: float
    breaker: BreakerConfig | None = None
    """The definition's circuit breaker, which counts this attempt once it is reported."""


def record_finished(item: Finished, metrics: Metrics, log: logging.Logger, worker_id: str) -> None:
    """What a reported attempt leaves behind in the metrics and the log."""
    result, execution = item.result, item.execution
    metrics.finished(
        execution.definition_uri,
        str(result.execution_status),
        str(result.attempt_status),
        item.seconds,
    )
    if result.attempt_status is not AttemptStatus.SUCCEEDED:
        # A failure is news for whoever runs the worker: at warning, with the error (the
        # extra fields name the execution, attempt, fencing token and this worker).
        error = result.error or {}
        log.warning(
            "attempt %d %s (%s): %s; execution %s",
            execution.attempt_count,
            result.attempt_status,
            error.get("kind"),
            error.get("message"),
            result.execution_status,
            extra=execution_fields(execution, worker_id),
        )
    elif log.isEnabledFor(logging.DEBUG):
        log.debug(
            "attempt %d finished: %s",
            execution.attempt_count,
            result.attempt_status,
            extra=execution_fields(execution, worker_id),
        )


class ResultBuffer:
    def __init__(
        self,
        store: ClaimStore,
        *,
        batch: int,
        interval: float,
        now: Callable[[], datetime | None],
        recorded: Callable[[Finished], None],
        stale: Callable[[Finished], None],
        stopping: Callable[[], bool],
        log: logging.Logger,
    ) -> None:
        if batch < 1 or interval < 0:
            raise ValueError("a report batch holds at least 1 result, after a delay of 0 s or more")
        self.store = store
        self.batch = batch
        self.interval = interval
        self._now = now
        self._recorded = recorded
        self._stale = stale
        self._stopping = stopping
        self._log = log
        self._waiting: list[Finished] = []
        self._wake = asyncio.Event()
        self._hurry = False
        self._flusher: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, item: Finished) -> None:
        self._waiting.append(item)
        if len(self._waiting) >= self.batch:
            self._wake.set()
        self._ensure_flusher()

    async def flush(self) -> None:
        """Returns once every result added so far is reported (or given up, when stopping).

        A batch the flusher has taken is no longer in the buffer but not committed either: the
        flush waits for the flusher too, not only for the buffer to empty. (Waiting for the
        buffer alone let a drain return with its last batch still on its way, and a workflow's
        orchestrator then read that batch's executions as RUNNING.)"""
        self._hurry = True
        try:
            while self._waiting or self._reporting():
                self._ensure_flusher()
                self._wake.set()
                assert self._flusher is not None
                await asyncio.shield(self._flusher)
        finally:
            self._hurry = False

    def _reporting(self) -> bool:
        """Whether the flusher is still at work (a batch it took may be on its way)."""
        return self._flusher is not None and not self._flusher.done()

    def _ensure_flusher(self) -> None:
        # The flusher lives only while results wait, so an idle worker holds no task for it.
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_loop(), name="worker-report")

    async def _flush_loop(self) -> None:
        while self._waiting:
            if len(self._waiting) < self.batch and self.interval > 0 and not self._hurry:
                # Wait for company, at most ``interval``: a fuller batch is a cheaper one.
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.interval)
            batch = self._waiting[: self.batch]
            del self._waiting[: len(batch)]
            try:
                accepted = await self.store.attempt_finish_many(
                    [item.result for item in batch], self._now()
                )
            except Exception as exc:
                if self._give_up_or_keep(batch, exc):
                    await asyncio.sleep(RETRY_SECONDS)
                continue
            for item, ok in zip(batch, accepted, strict=True):
                (self._recorded if ok else self._stale)(item)

    def _give_up_or_keep(self, batch: list[Finished], exc: Exception) -> bool:
        """After a failed report: True when the batch is back in the buffer for another try."""
        why = f"{type(exc).__name__}: {exc}"
        if self._stopping():
            self._log.error(
                "%d finished attempts not reported (%s); they run again once their leases expire",
                len(batch),
                why,
            )
            return False
        self._waiting[:0] = batch  # not acknowledged yet: keep them, in order
        self._log.warning(
            "reporting %d finished attempts failed (%s); retrying in %g s",
            len(batch),
            why,
            RETRY_SECONDS,
        )
        return True
