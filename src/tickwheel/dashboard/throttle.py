"""Failed dashboard sign-ins are limited per client address, so the sign-in form cannot be used
to try keys quickly. (Keys are 256-bit random and unguessable anyway; the limit also keeps a
scanner from filling the log and the database's key index with lookups.)

A sliding window in this process's memory: ``LIMIT`` failures in ``WINDOW`` from one address and
that address gets 429 with ``Retry-After`` until the oldest failure leaves the window. Every
attempt is refused while throttled, a right key included, and a success does not reset the count
(otherwise a guesser would sign in with a key of their own between guesses). Each API process
counts on its own, so N processes behind one address allow N times the limit. Behind a reverse
proxy every client shares the proxy's address: then one client's failures throttle all."""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from datetime import datetime, timedelta

from tickwheel.domain.clock import Clock
from tickwheel.domain.errors import TooManyRequests

LIMIT = 5
WINDOW = timedelta(minutes=1)
MAX_CLIENTS = 10_000


class SignInThrottle:
    def __init__(
        self,
        clock: Clock,
        limit: int = LIMIT,
        window: timedelta = WINDOW,
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        self._clock = clock
        self._limit = limit
        self._window = window
        self._max_clients = max_clients
        # Per address, its recent failures, oldest first; addresses in order of last failure, so
        # when the table is full the one quiet for longest is forgotten first.
        self._failures: OrderedDict[str, deque[datetime]] = OrderedDict()

    def _recent(self, client: str, now: datetime) -> deque[datetime]:
        failures = self._failures.get(client)
        if failures is None:
            return deque()
        while failures and failures[0] <= now - self._window:
            failures.popleft()
        if not failures:
            del self._failures[client]
        return failures

    def check(self, client: str) -> None:
        """Raises ``TooManyRequests`` while ``client`` has ``limit`` failures in the window."""
        now = self._clock.now()
        failures = self._recent(client, now)
        if len(failures) >= self._limit:
            wait = (failures[0] + self._window - now).total_seconds()
            seconds = max(1, math.ceil(wait))
            raise TooManyRequests(
                f"too many failed sign-ins from your address; try again in {seconds} s", seconds
            )

    def failed(self, client: str) -> None:
        now = self._clock.now()
        failures = self._recent(client, now)
        if not failures:
            self._failures[client] = failures
        failures.append(now)
        while len(failures) > self._limit:
            failures.popleft()
        self._failures.move_to_end(client)
        while len(self._failures) > self._max_clients:
            self._failures.popitem(last=False)
