"""What the submit lanes' tests share (tests/store/test_submit_lane*.py, test_submit_wakeups.py):
a store opened with its pool filled, its lanes, and a wait for the server to show a state."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.postgres.submit_lanes import SubmitLanes

WAIT_S = 10.0  # upper bound on waiting for the server to show a state (I/O, not logic)


async def open_store(
    pg_url: str, size: int, min_size: int | None = None, timeout: float = 30.0
) -> PostgresStore:
    """A migrated store whose pool holds ``min_size`` connections (all ``size`` by default)."""
    store = await PostgresStore.open(
        pg_url, max_size=size, min_size=size if min_size is None else min_size, timeout=timeout
    )
    await store.migrate()
    return store


@asynccontextmanager
async def opened_store(
    pg_url: str, size: int, min_size: int | None = None
) -> AsyncIterator[PostgresStore]:
    """``open_store``'s store, closed at the end."""
    store = await open_store(pg_url, size, min_size)
    try:
        yield store
    finally:
        await store.close()


def lanes_of(store: PostgresStore) -> SubmitLanes:
    assert store._lanes is not None
    return store._lanes


async def until(check: Callable[[], Awaitable[bool] | bool], what: str) -> None:
    """Polls ``check`` (a plain or an async one) until it holds, for ``WAIT_S`` at most."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while True:
        held = check()
        if held if not inspect.isawaitable(held) else await held:
            return
        if loop.time() > deadline:
            raise AssertionError(f"never: {what}")
        await asyncio.sleep(0.01)
