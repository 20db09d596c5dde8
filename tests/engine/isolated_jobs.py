"""Handlers for the process-isolation tests: each runs in a child process of its own, so these
may kill the process that runs them."""

from __future__ import annotations

import asyncio
import ctypes
import os
import time
from pathlib import Path
from typing import Any

from tickwheel.domain.errors import PermanentError
from tickwheel.engine.runners import JobContext


def where(context: JobContext) -> dict[str, Any]:
    """Says which process ran it, and what context it got."""
    return {"pid": os.getpid(), "attempt": context.attempt, "token": context.fencing_token}


async def async_where(delay: float = 0.0) -> dict[str, Any]:
    await asyncio.sleep(delay)
    return {"pid": os.getpid()}


def exits(code: int) -> None:
    os._exit(code)


def segfaults() -> None:
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def fails() -> None:
    raise ValueError("the ledger is locked")


def fails_for_good() -> None:
    raise PermanentError("the account is closed", {"account": 7})


def returns_a_list() -> list[int]:
    return [1, 2]


def sleeps(pid_file: str, seconds: float) -> None:
    """Writes its pid, then sleeps: the test kills it by cancelling or timing out."""
    Path(pid_file).write_text(str(os.getpid()))
    time.sleep(seconds)
