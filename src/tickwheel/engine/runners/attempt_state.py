"""What a running handler and its worker share while the attempt runs: the handler's latest
progress and checkpoint, waiting for the next heartbeat to carry them (many calls, one write),
and the cancel the heartbeat brought back.

A sync handler calls in from its own thread while the worker reads on the event loop: a lock
keeps a report from being lost between the worker's take and its reset."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

from tickwheel.domain.running import Cancelled, checkpoint_value, progress_value
from tickwheel.services.settings import WorkerSettings

__all__ = ["CANCEL_GRACE", "AttemptState", "Pending"]

CANCEL_GRACE: Final = WorkerSettings.cancel_grace
"""Seconds a cancelled command or container gets between SIGTERM and SIGKILL."""

_NOTHING: Final = object()


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Pending:
    """What the next heartbeat writes (None: nothing new)."""

    __slots__ = ("checkpoint", "progress")

    def __init__(self, progress: dict[str, Any] | None, checkpoint: Any) -> None:
        self.progress = progress
        self.checkpoint = checkpoint

    def __bool__(self) -> bool:
        return self.progress is not None or self.checkpoint is not None


class AttemptState:
    def __init__(
        self,
        checkpoint: Any = None,
        *,
        cancel_grace: float = CANCEL_GRACE,
        now: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.checkpoint = checkpoint
        self.cancel_grace = cancel_grace
        self.cancelled = False
        self._now = now
        self._lock = threading.Lock()
        self._progress: dict[str, Any] | None = None
        self._checkpoint: Any = _NOTHING

    def __getstate__(self) -> dict[str, Any]:
        # Pickled with the JobContext for ``isolation: process``: the child reads the
        # checkpoint; what it reports stays in the child (only its result comes back).
        state = {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_now")}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _lock=threading.Lock(), _now=_utc_now)

    def progress(self, fraction: float, message: str = "") -> None:
        value = progress_value(fraction, message, self._now())
        with self._lock:
            self._progress = value
        self._raise_if_cancelled()

    def save_checkpoint(self, value: Any) -> None:
        kept = checkpoint_value(value)
        with self._lock:
            self._checkpoint = kept
            self.checkpoint = kept
        self._raise_if_cancelled()

    def cancel(self) -> None:
        self.cancelled = True

    @property
    def has_pending(self) -> bool:
        with self._lock:
            return self._progress is not None or self._checkpoint is not _NOTHING

    def take(self) -> Pending:
        """What is new since the last take; the caller writes it, or ``give_back`` on failure."""
        with self._lock:
            checkpoint = None if self._checkpoint is _NOTHING else self._checkpoint
            pending = Pending(self._progress, checkpoint)
            self._progress, self._checkpoint = None, _NOTHING
        return pending

    def give_back(self, pending: Pending) -> None:
        """A write that failed: keep its values for the next one, unless newer ones came."""
        with self._lock:
            if self._progress is None:
                self._progress = pending.progress
            if self._checkpoint is _NOTHING and pending.checkpoint is not None:
                self._checkpoint = pending.checkpoint

    def _raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise Cancelled("the execution was cancelled while it ran")
