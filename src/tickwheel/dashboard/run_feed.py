"""Live updates of one workflow run: one reader per watched run, shared by every open page.

Like the overview's ``Feed``, the server aggregates and the browser only paints. While at least
one page watches a run, its ``RunFeed`` reads the run's task states in one statement at most
once per ``TICK`` (never sooner than three times the last read took; every ``IDLE_TICK`` once
the run has finished, since only a retry can move it again), and hands a snapshot to each page
through a one-slot mailbox only when something changed. A hundred open tabs on one run cost one
query a second; a run nobody watches costs nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from tickwheel.client.wire import iso
from tickwheel.dashboard.live import STREAM_LIFETIME, Mailbox
from tickwheel.domain.workflow_runs import TASK_TERMINAL, RunStatus, TaskRunStatus
from tickwheel.store.workflow_view_protocol import RunTaskStates, TaskState, WorkflowViewStore

log = logging.getLogger("tickwheel.dashboard")
TICK = 1.0
IDLE_TICK = 5.0
KEEP_ALIVE = 5.0
"""Seconds without a change before a comment goes out (and the page's departure is noticed)."""
MAX_FEEDS = 256
"""Runs watched at once per process; a page beyond this shows the state of its first paint."""
Snapshot = dict[str, Any]


def task_state(task: TaskState) -> str:
    """What a node shows: a submitted task takes its execution's status (READY, RUNNING,
    RETRY_WAIT, ...) once the execution exists; otherwise the task run's own status."""
    if task.status is TaskRunStatus.SUBMITTED and task.execution_status:
        return task.execution_status
    return str(task.status)


def snapshot_of(states: RunTaskStates) -> Snapshot:
    tasks = sorted(states.tasks, key=lambda t: t.task_name)
    return {
        "run": {
            "status": str(states.run_status),
            "retryCount": states.retry_count,
            "finishedAt": iso(states.finished_at),
            "canCancel": states.run_status is RunStatus.RUNNING,
            "canRetry": states.run_status in (RunStatus.FAILED, RunStatus.CANCELLED),
        },
        "tasks": [
            {
                "name": t.task_name,
                "state": task_state(t),
                "status": str(t.status),
                "executionId": None if t.execution_id is None else str(t.execution_id),
                "executionStatus": t.execution_status,
                "attempts": t.attempt_count,
                "updatedAt": iso(t.updated_at),
            }
            for t in tasks
        ],
        "done": sum(1 for t in tasks if t.status in TASK_TERMINAL),
        "total": len(tasks),
    }


class RunFeed:
    def __init__(
        self,
        views: WorkflowViewStore,
        tenant: str,
        run_id: uuid.UUID,
        on_idle: Callable[[RunFeed], None],
    ) -> None:
        self.views = views
        self.tenant = tenant
        self.run_id = run_id
        self.on_idle = on_idle
        self.clients: set[Mailbox] = set()
        self.task: asyncio.Task[None] | None = None
        self.last: Snapshot | None = None
        self.queries = 0
        self._left = asyncio.Event()
        """Set when the last page leaves: the loop ends now, not after its pause."""

    def subscribe(self) -> Mailbox:
        box = Mailbox()
        if self.last is not None:
            box.put(self.last)
        self.clients.add(box)
        self._left.clear()
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._run(), name=f"dashboard-run-{self.run_id}")
        return box

    def unsubscribe(self, box: Mailbox) -> None:
        self.clients.discard(box)
        if not self.clients:
            self._left.set()
            self.on_idle(self)

    async def read(self) -> Snapshot | None:
        states = await self.views.workflow_view_task_states(self.tenant, self.run_id)
        self.queries += 1
        return None if states is None else snapshot_of(states)

    async def _run(self) -> None:
        while self.clients:
            began = time.monotonic()
            try:
                snapshot = await self.read()
                if snapshot is not None and snapshot != self.last:
                    self.last = snapshot
                    for box in list(self.clients):
                        box.put(snapshot)
            except Exception:  # a failed tick must not end the feed for every page
                log.exception("dashboard feed of workflow run %s failed a tick", self.run_id)
            spent = time.monotonic() - began
            running = self.last is None or self.last["run"]["status"] == RunStatus.RUNNING
            pause = max((TICK if running else IDLE_TICK) - spent, 3 * spent, 0.05)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._left.wait(), pause)


class RunHub:
    def __init__(self, views: WorkflowViewStore) -> None:
        self.views = views
        self.feeds: dict[tuple[str, uuid.UUID], RunFeed] = {}

    def feed(self, tenant: str, run_id: uuid.UUID) -> RunFeed | None:
        """The run's feed, made on first use; None when ``MAX_FEEDS`` runs are watched."""
        key = (tenant, run_id)
        if key not in self.feeds:
            if len(self.feeds) >= MAX_FEEDS:
                return None
            self.feeds[key] = RunFeed(self.views, tenant, run_id, self._idle)
        return self.feeds[key]

    def _idle(self, feed: RunFeed) -> None:
        # Its loop sees no clients and ends by itself; the next page starts a fresh feed.
        if self.feeds.get((feed.tenant, feed.run_id)) is feed:
            del self.feeds[(feed.tenant, feed.run_id)]

    async def stream(
        self, feed: RunFeed, is_disconnected: Callable[[], Awaitable[bool]]
    ) -> AsyncIterator[str]:
        """Server-Sent Events: a ``run`` event per change, a comment now and then to keep
        the connection open; the stream ends after ``STREAM_LIFETIME`` and the browser
        reconnects (receiving the latest snapshot at once)."""
        box = feed.subscribe()
        deadline = time.monotonic() + STREAM_LIFETIME
        try:
            yield "retry: 1000\n\n"
            while time.monotonic() < deadline:
                if await is_disconnected():
                    return
                snapshot = await box.get(timeout=KEEP_ALIVE)
                yield _event(snapshot) if snapshot is not None else ": keep-alive\n\n"
        finally:
            feed.unsubscribe(box)


def _event(snapshot: Snapshot) -> str:
    return f"event: run\ndata: {json.dumps(snapshot, separators=(',', ':'))}\n\n"
