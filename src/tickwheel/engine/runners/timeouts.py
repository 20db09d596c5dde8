"""Each attempt's time limit (its definition's ``timeout``), kept for all the attempts running on
an event loop by one timer, as ``asyncio.timeout`` would keep it for one.

``asyncio.timeout`` schedules a timer when an attempt starts and cancels it when the attempt
ends: a timer handle pushed onto the loop's heap and left there, cancelled, for each attempt, a
tenth of a no-op attempt's bookkeeping. Here an attempt costs an entry in a dict; the one timer
is set for the earliest limit, and moved only when an attempt with an earlier limit starts.

The semantics are ``asyncio.timeout``'s: at the limit the attempt's task is cancelled; when the
attempt ends, that cancel is taken back (``uncancel``), and a ``CancelledError`` it caused is the
timeout's, unless someone else cancelled the task too (a shutdown, a lost lease), whose cancel
then goes on."""

from __future__ import annotations

import asyncio
import weakref

__all__ = ["Expiry", "Timeouts", "timeouts"]


class Expiry:
    """One attempt's limit: its task, when (loop time), and what happened."""

    __slots__ = ("cancelling", "expired", "others", "task", "when")

    def __init__(self, task: asyncio.Task[object], when: float) -> None:
        self.task = task
        self.when = when
        self.cancelling = task.cancelling()
        """Cancels pending on the task before the attempt began (``asyncio.timeout``'s count)."""
        self.expired = False
        self.others = False
        """Set at the end of an expired attempt: someone else cancelled the task too."""


class Timeouts:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._running: dict[Expiry, None] = {}
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._running)

    def start(self, seconds: float) -> Expiry:
        """The current task's limit, ``seconds`` from now; ``end`` it however the attempt ends."""
        task = asyncio.current_task(self.loop)
        if task is None:
            raise RuntimeError("an attempt's time limit is kept for a task")
        expiry = Expiry(task, self.loop.time() + seconds)
        self._running[expiry] = None
        timer = self._timer
        if timer is None or expiry.when < timer.when():
            if timer is not None:
                timer.cancel()
            self._timer = self.loop.call_at(expiry.when, self._due)
        return expiry

    def end(self, expiry: Expiry) -> bool:
        """Stops keeping ``expiry``; True when it expired. Its cancel is then taken back, and
        ``expiry.others`` says whether the task stays cancelled by someone else."""
        if not expiry.expired:
            self._running.pop(expiry, None)
            return False
        expiry.others = expiry.task.uncancel() > expiry.cancelling
        return True

    def _due(self) -> None:
        """Cancels every attempt past its limit and sets the timer for the earliest of the
        others (a walk over the running attempts, about once per limit)."""
        self._timer = None
        now = self.loop.time()
        running = self._running
        for expiry in [e for e in running if e.when <= now]:
            del running[expiry]
            expiry.expired = True
            expiry.task.cancel()
        if running:
            self._timer = self.loop.call_at(min(e.when for e in running), self._due)


_keepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Timeouts] = (
    weakref.WeakKeyDictionary()
)
_last: Timeouts | None = None


def timeouts() -> Timeouts:
    """The running loop's keeper of time limits (one per loop, gone with it)."""
    global _last
    loop = asyncio.get_running_loop()
    keeper = _last
    if keeper is None or keeper.loop is not loop:
        keeper = _keepers.get(loop)
        if keeper is None:
            keeper = _keepers[loop] = Timeouts(loop)
        _last = keeper
    return keeper
