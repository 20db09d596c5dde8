"""Job functions for the python runner's tests, named by entrypoints such as
``tests.engine.jobs_for_tests:add``."""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any

from tickwheel.domain.errors import PermanentError
from tickwheel.engine.runners import JobContext

# The sync sleeper's handshake: it sets STARTED, waits for RELEASE, then sets FINISHED.
STARTED = threading.Event()
RELEASE = threading.Event()
FINISHED = threading.Event()
CANCELLED: list[str] = []


def add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


def product(a: int, b: int) -> dict[str, int]:
    """Another tenant's code under the same name as ``add``: a result that tells them apart."""
    return {"sum": a * b}


async def async_add(a: int, b: int) -> dict[str, int]:
    await asyncio.sleep(0)
    return {"sum": a + b}


def with_context(name: str, context: JobContext) -> dict[str, Any]:
    return {"name": name, "execution_id": str(context.execution_id), "attempt": context.attempt}


async def annotated(job: JobContext) -> dict[str, Any]:
    return {"token": job.fencing_token, "uri": job.definition_uri}


class Jobs:
    @staticmethod
    def double(x: int) -> dict[str, int]:
        return {"sum": 2 * x}


def nothing() -> None:
    return None


def a_list() -> list[int]:
    return [1, 2]


def echo(**values: Any) -> dict[str, Any]:
    return values


def fails(depth: int = 0) -> None:
    if depth > 0:
        _deeper(depth - 1)  # alternating frames, which tracebacks do not fold into one line
    raise ValueError("the ledger is locked")


def _deeper(depth: int) -> None:
    fails(depth)


def fails_for_good() -> None:
    raise PermanentError("the account is closed", {"account": 7})


def exits() -> None:
    sys.exit(3)


def sync_sleeper() -> dict[str, bool]:
    STARTED.set()
    RELEASE.wait(10)
    FINISHED.set()
    return {"late": True}


async def naps(seconds: float) -> dict[str, float]:
    await asyncio.sleep(seconds)
    return {"slept": seconds}


async def async_sleeper() -> None:
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        CANCELLED.append("async_sleeper")
        raise


class Unhashable:
    """A callable object that cannot be a cache key: its signature is read every time."""

    __hash__ = None  # type: ignore[assignment]

    def __call__(self, x: int) -> dict[str, int]:
        return {"sum": x + 1}


unhashable = Unhashable()


UNSTORABLE = {"nul": "a\x00b", "surrogate": "a\ud800b"}


def unstorable_output(kind: str) -> dict[str, Any]:
    """Text that PostgreSQL refuses (NUL) or that no response can encode (a lone surrogate)."""
    return {"text": UNSTORABLE[kind]}


def fails_unstorably(kind: str) -> None:
    raise ValueError(f"cannot read {UNSTORABLE[kind]}")


def maybe_fails(fail: bool) -> dict[str, bool]:
    """Fails when told to: the circuit breaker tests' dependency, down or up by input."""
    if fail:
        raise ConnectionError("the payment API is down")
    return {"ok": True}
