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
makes anyone wait for it.

**One wake-up in flight at a time.** Each insert of a READY execution NOTIFYs the workers inside
its own statement, and PostgreSQL serializes the commits of notifying transactions (a lock held
until the commit is flushed): with four in flight they waited for each other's commit, and the
lock waits cost the database about a fifth of its CPU per single submit (docs/scaling.md, "B1's
single submits: one READY wake-up in flight at a time"). So of the lanes' submissions whose only
wake-up is the READY one, one at a time carries it (the *carrier*); one that starts while a
carrier runs goes without (``notify`` empty) and, if it inserted, *owes* its wake-up. A carrier
that starts later takes the debt over and pays it when it inserts (its NOTIFY comes with its
commit, after theirs: no worker is woken before an owed row is there to claim); when the last
submission in flight ends with a debt unpaid, a lane sends the NOTIFY alone. A lone submission,
or one whose wake-up carries due hints (SCHEDULED items), is sent as before: only the same
wake-up of the same store is coalesced, never a row that was not inserted (a repeat still wakes
nobody)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, TypeVar

from psycopg import pq

from tickwheel.store.postgres.pool import Pool
from tickwheel.store.postgres.submit_lane import SubmitLane

log = logging.getLogger(__name__)

NO_WAKEUP = "[]"
"""The ``notify`` parameter of a submission that goes without its wake-up (it owes it)."""
MAX_LANES = 4
"""Lanes at most: the single submissions a process runs at once on kept connections (B1 keeps
four in flight); more go through the pool as before."""


def lane_count(max_size: int) -> int:
    """How many lanes a pool of ``max_size`` connections gets: at most half of them, and one for
    a pool of two or three (a pool of one lends none: ``Pool.lend_idle``)."""
    return max(1, min(MAX_LANES, max_size // 2))


Params = Mapping[str, str | None]
R = TypeVar("R", list[Any], int)
Send = Callable[[SubmitLane, Params], Awaitable[R | None]]
"""How a lane runs a submission: its rows (``SubmitLane.run``) or their count (``count``)."""


def _rows(lane: SubmitLane, params: Params) -> Awaitable[list[Any] | None]:
    return lane.run(params)


def _count(lane: SubmitLane, params: Params) -> Awaitable[int | None]:
    return lane.count(params)


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
        self._ready_wakeup: str | None = None  # the last ``notify`` seen to be the READY one
        self._carrying = False  # a carrier's statement is in flight
        self._in_flight = 0  # coalesced submissions (carriers and not) in flight
        self._owed: set[str] = set()  # wake-ups owed by submissions inserted without theirs
        self._paying: asyncio.Task[None] | None = None

    @property
    def first(self) -> SubmitLane:
        return self._lanes[0]

    @property
    def lanes(self) -> tuple[SubmitLane, ...]:
        return tuple(self._lanes)

    def run(self, params: Params) -> Coroutine[Any, Any, list[Any] | None]:
        """The first free lane's ``run`` (None: every lane busy, or the free one could take no
        connection; the caller then uses the pool)."""
        return self._on_free_lane(params, _rows)  # (awaited by the caller: no frame between)

    def count(self, params: Params) -> Coroutine[Any, Any, int | None]:
        """``run``, answering how many rows the statement returned (``SubmitLane.count``)."""
        return self._on_free_lane(params, _count)

    async def _on_free_lane(self, params: Params, send: Send[R]) -> R | None:
        if asyncio.get_running_loop() is not self._pool.loop:
            # Another loop (a blocking Client's thread): no lane runs anything from there. Asked
            # once here (in Python 3.11 each ask is a getpid system call).
            return None
        for lane in self._lanes:
            if not lane.busy:
                try:
                    notify = params.get("notify")
                    if notify is not None and self._coalesced(notify):
                        return await self._run_coalesced(lane, params, notify, send)
                    return await send(lane, params)
                finally:
                    if self._pool.waiting:
                        # A caller waits for a connection: this one goes back to the pool now
                        # rather than when the next caller finds none idle.
                        await lane.give_back()
        return None

    @property
    def paying(self) -> bool:
        """Sending a wake-up owed (on a lane, which is busy meanwhile)."""
        return self._paying is not None

    def _coalesced(self, notify: str) -> bool:
        """Whether ``notify`` is only the READY wake-up (the same text every time for a store)."""
        if notify is self._ready_wakeup:
            return True
        try:
            signals = json.loads(notify)
        except ValueError:
            return False
        if (
            isinstance(signals, list)
            and len(signals) == 1
            and isinstance(signals[0], dict)
            and signals[0].get("status") == "READY"
        ):
            self._ready_wakeup = notify
            return True
        return False

    async def _run_coalesced(
        self, lane: SubmitLane, params: Params, notify: str, send: Send[R]
    ) -> R | None:
        """``send`` on ``lane`` as the carrier of ``notify`` and the debts it finds, or without
        it. What it answers says whether it inserted: None (not run), or rows (a list, or
        their count) that are none or some."""
        carrier = not self._carrying
        took = False
        if carrier:
            self._carrying = True
            took = notify in self._owed
            self._owed.discard(notify)
        else:
            params = {**params, "notify": NO_WAKEUP}
        self._in_flight += 1
        rows: R | None = None
        failed = True
        try:
            rows = await send(lane, params)
            failed = False
            return rows
        finally:
            self._in_flight -= 1
            if carrier:
                self._carrying = False
            if failed:
                # Committed or not, unknown: a wake-up that finds nothing is harmless.
                self._owed.add(notify)
            elif rows is None:
                # Not run here: the pool's path runs it with its own wake-up.
                if took:
                    self._owed.add(notify)
            elif rows:
                if not carrier:
                    self._owed.add(notify)
                # A carrier that inserted woke the workers after its commit: paid.
            elif took:
                self._owed.add(notify)  # inserted nothing, so it notified nothing
            if self._owed and self._in_flight == 0 and self._paying is None:
                self._paying = asyncio.get_running_loop().create_task(self._pay())

    async def _pay(self) -> None:
        """Sends the wake-ups still owed when no submission is left in flight to carry them."""
        try:
            while self._owed and self._in_flight == 0:
                owed, self._owed = self._owed, set()
                for notify in owed:
                    await self._notify(notify)
        finally:
            self._paying = None
            if self._owed and self._in_flight == 0:  # owed while the last one was sent
                self._paying = asyncio.get_running_loop().create_task(self._pay())

    async def _notify(self, notify: str) -> None:
        try:
            # A lane's kept connection if one is idle (none is taken for this), else the pool.
            for lane in self._lanes:
                if lane.keeps_idle and await lane.notify(notify):
                    return
            async with self._pool.connection() as conn:
                await conn.execute(
                    "SELECT pg_notify(signal.channel, signal.payload) FROM"
                    " jsonb_to_recordset(%s::jsonb) AS signal (channel text, payload text,"
                    " status text)",
                    (notify,),
                )
        except Exception:
            # The workers' polling finds the work (as after any lost notification).
            log.warning("an owed wake-up of the workers could not be sent", exc_info=True)

    async def give_back(self) -> None:
        """A caller found no connection idle: one kept by a lane not running a submission goes
        back to the pool (the last such lane's, the least used)."""
        for lane in reversed(self._lanes):
            if lane.keeps_idle:
                await lane.give_back()
                return

    async def close(self) -> None:
        paying = self._paying
        if paying is not None:
            await asyncio.gather(paying, return_exceptions=True)
        for lane in self._lanes:
            await lane.close()
