"""Several submit lanes (``submit_lane.py``), one kept connection each, so that single
submissions in flight together each get one.

Why: one lane serves one submission at a time, and the others took the pool's path beside it.
An API server answers concurrent single submits (four clients in flight in B1): with one lane,
most of them paid the pool's checkout, psycopg's cursor and a reader registration per wait, the
largest part of the server's CPU per request after the HTTP layer (py-spy, docs/scaling.md,
"The hot path's server CPU"). With a lane per submission in flight each is a send and a read.

The lanes keep the one lane's rules: each takes only a connection the pool has idle, never more
than half the pool's connections are kept (the others stay for everyone else), a caller who
finds none idle gets a kept one first (``Pool.keeper``), and a lane whose submission ends while
someone waits for a connection gives its connection back at once, so a kept connection never
makes anyone wait for it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from psycopg import pq

from tickwheel.store.postgres.pool import Pool
from tickwheel.store.postgres.submit_lane import SubmitLane

MAX_LANES = 4
"""Lanes at most: the single submissions a process runs at once on kept connections (B1 keeps
four in flight); more go through the pool as before."""


def lane_count(max_size: int) -> int:
    """How many lanes a pool of ``max_size`` connections gets: at most half of them, and one for
    a pool of two or three (a pool of one lends none: ``Pool.lend_idle``)."""
    return max(1, min(MAX_LANES, max_size // 2))


class SubmitLanes:
    """``SubmitLane``'s ``run``, ``give_back`` and ``close`` over ``count`` lanes; ``first`` is
    the one a lone submission uses (the others only take connections while it is busy)."""

    def __init__(
        self,
        pool: Pool,
        query: str,
        row: Callable[[pq.abc.PGresult, int], Any],
        count: int,
    ) -> None:
        self._pool = pool
        self._lanes = [SubmitLane(pool, query, row) for _ in range(max(1, count))]
        pool.keeper = self.give_back  # each lane made itself the keeper: the set is

    @property
    def first(self) -> SubmitLane:
        return self._lanes[0]

    @property
    def lanes(self) -> tuple[SubmitLane, ...]:
        return tuple(self._lanes)

    async def run(self, params: Mapping[str, str | None]) -> list[Any] | None:
        """The first free lane's ``run`` (None: every lane busy, or the free one could take no
        connection; the caller then uses the pool)."""
        for lane in self._lanes:
            if not lane.busy:
                try:
                    return await lane.run(params)
                finally:
                    if self._pool.waiting:
                        # A caller waits for a connection: this one goes back to the pool now
                        # rather than when the next caller finds none idle.
                        await lane.give_back()
        return None

    async def give_back(self) -> None:
        """A caller found no connection idle: one kept by a lane not running a submission goes
        back to the pool (the last such lane's, the least used)."""
        for lane in reversed(self._lanes):
            if lane.keeps_idle:
                await lane.give_back()
                return

    async def close(self) -> None:
        for lane in self._lanes:
            await lane.close()
