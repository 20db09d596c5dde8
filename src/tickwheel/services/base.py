"""The shape of every long-running service: ``run_once()`` does one round of work and returns
how much it did (tests call it directly, with a fake clock, and never sleep); ``run()`` repeats
it until ``stop()``, sleeping in between the way the service needs.

The engine's services, the Cron Service and the orchestrator all build on it, so it sits below
the engine and the client and imports neither, nor any store: a database outage is recognised
by ``Unavailable`` (what the stores raise) or by the driver's own connection errors, named here
by class name so that no driver is imported.

A database outage is the one failure a service expects: it logs it once, backs off (capped,
exponential, with jitter so that a fleet does not reconnect in step) and carries on; when a
round succeeds again it says so. Any other failure is logged each time and retried after
``retry_after`` seconds, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import secrets
import socket
from collections.abc import Awaitable
from datetime import datetime

from tickwheel.domain.clock import Clock, SystemClock
from tickwheel.domain.errors import Unavailable
from tickwheel.observability.metrics import Metrics, process_metrics

# The drivers' exceptions for a lost or unreachable database (psycopg, sqlite3, aiosqlite):
# matched by module and name along the exception's classes, not imported.
_DRIVER_ERRORS = {
    ("psycopg", "OperationalError"),
    ("psycopg", "InterfaceError"),
    ("psycopg_pool", "PoolTimeout"),
    ("psycopg_pool", "PoolClosed"),
    ("sqlite3", "OperationalError"),
}


def new_owner() -> str:
    """An owner id unique to this service instance: host and pid say where it runs (for a
    person reading a lease), the random tail keeps two instances in one process apart."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def is_database_error(exc: BaseException) -> bool:
    """True for an outage (the database down, restarting, unreachable, the pool exhausted)."""
    if isinstance(exc, Unavailable):
        return True
    for cls in type(exc).__mro__:
        root = cls.__module__.split(".", 1)[0]
        if (root, cls.__name__) in _DRIVER_ERRORS:
            return True
    return False


class Service:
    name = "service"
    retry_after = 1.0
    """Seconds before the next round after a failure that is not an outage."""
    backoff_base = 1.0
    backoff_cap = 30.0
    """An outage's first back-off and its longest one (before jitter)."""
    idle_after_failure = False
    """Whether a failed round is followed by the usual ``idle(0)`` too (the Cron Service and
    the orchestrator poll again after their pause; the engine's services go straight on)."""

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        owner: str | None = None,
        metrics: Metrics | None = None,
        logger: str | None = None,
    ) -> None:
        self.clock: Clock = clock or SystemClock()
        self.owner = owner or new_owner()
        self.log = logging.getLogger(logger or f"tickwheel.{self.name}")
        # The process's metrics; a test swaps in a fresh ``Metrics`` to read exact values.
        self.metrics: Metrics = metrics or process_metrics()
        self.random = random.Random()
        """The back-off's jitter; a test seeds it."""
        self.failures = 0
        """Outage rounds in a row (0 once a round succeeds)."""
        self.rounds = 0
        """Rounds finished, failed or not, since start: ``wait_rounds`` waits on it."""
        self._stopping = asyncio.Event()
        self._round = asyncio.Event()

    def store_now(self) -> datetime | None:
        """The ``now`` handed to time-dependent queries. None in production, so the database's
        clock decides due times and leases (nodes with skewed clocks still agree); a test's
        fake clock otherwise."""
        return None if isinstance(self.clock, SystemClock) else self.clock.now()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def stop(self) -> None:
        self._stopping.set()

    async def run_once(self) -> int:
        raise NotImplementedError

    async def before_round(self) -> None:
        """Work due before each round, inside its error handling (the orchestrator's sweep)."""

    async def idle(self, did: int) -> None:
        """Waits before the next round; subclasses wait on the store's signals."""
        await self.pause(0.0 if did else 1.0)

    async def pause(self, seconds: float) -> None:
        """Sleeps, but returns at once when the service is asked to stop."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def wait_or_stop(self, signal: Awaitable[object]) -> None:
        """Waits for a store's signal (which ends at its own timeout) or for the stop, whichever
        comes first. The other is cancelled, and so is each when this wait is: a wait on
        LISTEN/NOTIFY left behind would take the next signal meant for the next wait."""
        woken = asyncio.ensure_future(signal)
        stopped = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait((woken, stopped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (woken, stopped):
                task.cancel()

    def backoff_seconds(self) -> float:
        """The pause after the ``failures``-th outage round in a row: doubling from
        ``backoff_base`` up to ``backoff_cap``, times a jitter in [0.8, 1.2] so that services
        started together do not all retry at the same instant; never above the cap."""
        steps = min(max(self.failures - 1, 0), 30)
        delay = min(self.backoff_cap, self.backoff_base * 2.0**steps)
        return min(self.backoff_cap, delay * self.random.uniform(0.8, 1.2))

    async def wait_rounds(self, count: int) -> None:
        """Returns once ``rounds`` reaches ``count`` (a test's signal that the loop went round,
        failures included, without sleeping for it)."""
        while self.rounds < count:
            self._round.clear()
            await self._round.wait()

    def started_message(self) -> str:
        return f"{self.name} started"

    def stopped_message(self) -> str:
        return f"{self.name} stopped"

    async def run(self) -> None:
        self.log.info("%s", self.started_message())
        while not self.stopping:
            try:
                await self.before_round()
                did = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                await self._failed(exc)
                if self.idle_after_failure and not self.stopping:
                    await self.idle(0)
                continue
            if self.failures:
                self.log.info(
                    "%s: the database is back after %d failed rounds", self.name, self.failures
                )
                self.failures = 0
            self._went_round()
            await self.idle(did)
        self.log.info("%s", self.stopped_message())

    async def _failed(self, exc: Exception) -> None:
        if not is_database_error(exc):
            # Not an outage: a bug or a bad row. Say so every time, retry at the usual pace.
            self.log.exception("%s round failed; retrying", self.name)
            self._went_round()
            await self.pause(self.retry_after)
            return
        self.failures += 1
        delay = self.backoff_seconds()
        if self.failures == 1:  # once per outage, not once per round
            self.log.warning(
                "%s: the database is unavailable (%s: %s); backing off, retrying until it is back",
                self.name,
                type(exc).__name__,
                exc,
            )
        else:
            self.log.debug("%s: still unavailable; next try in %.1fs", self.name, delay)
        self._went_round()
        await self.pause(delay)

    def _went_round(self) -> None:
        self.rounds += 1
        self._round.set()
