"""Job handlers for the real-process tests. The tests copy this file into a temporary folder as
``tw_process_jobs.py`` and hand that folder to ``tickwheel worker --path``, so the worker
imports it under a name nothing else uses.

Every handler appends what it does to a journal (one JSON object per line, one ``write`` per line
on an ``O_APPEND`` file, so lines of concurrent processes never interleave): the execution id, the
attempt number, the fencing token, the worker's pid and both clocks. ``CLOCK_MONOTONIC`` is one
clock for the whole machine, so intervals recorded by different workers can be compared."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from typing import Any

from tickwheel.engine.runners import JobContext

JOURNAL_ENV = "TW_PROCESS_JOURNAL"
_fd: int | None = None
_fd_lock = threading.Lock()


def _journal_fd() -> int:
    global _fd
    with _fd_lock:
        if _fd is None:
            _fd = os.open(os.environ[JOURNAL_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return _fd


def record(event: str, context: JobContext, **extra: Any) -> None:
    line = {
        "event": event,
        "execution_id": str(context.execution_id),
        "attempt": context.attempt,
        "token": context.fencing_token,
        "pid": os.getpid(),
        "mono": time.monotonic(),
        "real": time.time(),
        **extra,
    }
    os.write(_journal_fd(), (json.dumps(line) + "\n").encode())


async def slow(seconds: float, context: JobContext) -> dict[str, int]:
    """Sleeps ``seconds``; returns the pid of the worker that ran it, to tell outputs apart."""
    record("start", context)
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        record("cancelled", context)
        raise
    record("end", context)
    return {"pid": os.getpid(), "token": context.fencing_token}


def slow_sync(seconds: float, context: JobContext) -> dict[str, int]:
    """``slow`` as a plain function: it runs in a thread of the worker's pool."""
    record("start", context)
    time.sleep(seconds)
    record("end", context)
    return {"pid": os.getpid(), "token": context.fencing_token}


async def noop(context: JobContext) -> None:
    record("start", context)
    await asyncio.sleep(0)
    record("end", context)


def noop_sync(context: JobContext) -> None:
    record("start", context)
    record("end", context)


async def hang(context: JobContext) -> None:
    """Never returns on its own: only cancellation (the definition's timeout) ends it."""
    record("start", context)
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        record("cancelled", context)
        raise


def hang_sync(context: JobContext) -> None:
    """The same in a thread, which nobody can cancel: the thread stays blocked for good."""
    record("start", context)
    threading.Event().wait()


def crash(context: JobContext) -> None:
    """Poison: kills the worker process that runs it, every time."""
    record("start", context)
    os.kill(os.getpid(), signal.SIGKILL)


def exit_now(context: JobContext) -> None:
    """Poison: ends the process that runs it with ``os._exit(3)``, every time (the worker, or
    under ``isolation: process`` the attempt's own child)."""
    record("start", context)
    os._exit(3)


def flaky(fail: bool, context: JobContext) -> dict[str, bool]:
    """Fails when told to: the dependency of the circuit breaker tests, down or up."""
    record("start", context, fail=fail)
    if fail:
        raise ConnectionError("the payment API is down")
    return {"ok": True}


async def keyed(customer: str, n: int, context: JobContext) -> None:
    """A short job of one customer's queue (tests of concurrency keys): records its start and
    end, so that the test can tell whether two of one customer ever overlapped."""
    record("start", context, customer=customer, n=n)
    await asyncio.sleep(0.1)
    record("end", context, customer=customer, n=n)
