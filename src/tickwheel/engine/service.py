"""The shape of every long-running service: ``run_once()`` does one round of work and returns
how much it did (tests call it directly, with a fake clock, and never sleep); ``run()`` repeats
it until ``stop()``, sleeping in between the way the service needs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime

from tickwheel.domain.clock import Clock, SystemClock
from tickwheel.observability.metrics import Metrics, process_metrics


class Service:
    name = "service"

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self.log = logging.getLogger(f"tickwheel.{self.name}")
        # The process's metrics; a test swaps in a fresh ``Metrics`` to read exact values.
        self.metrics: Metrics = process_metrics()
        self._stopping = asyncio.Event()

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

    async def run(self) -> None:
        self.log.info("%s started", self.name)
        while not self.stopping:
            try:
                did = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A database hiccup must not kill the service: log, back off, try again.
                self.log.exception("%s round failed; retrying", self.name)
                await self.pause(1.0)
                continue
            await self.idle(did)
        self.log.info("%s stopped", self.name)
