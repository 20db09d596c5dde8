"""The scheduler's side of the store, shared by both backends: what a promotion reports, the
cursor and rows of the due window, and the due hints that tell a scheduler about executions
inserted inside its loaded window.

Due hints are hints, like every signal here: a lost one delays an execution until the next
catch-all sweep, never loses it. A subscriber that may have missed some (its inbox overflowed,
the listener reconnected) is told so and reloads its window from the database."""

from __future__ import annotations

import uuid
import weakref
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tickwheel.domain.models import Execution
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import NewExecution

# Hints are sent for executions due within this much of their submission only: a window is at
# most this long (the setting is capped to it), and a bulk load of far-future work then costs the
# schedulers nothing.
HINT_HORIZON = timedelta(minutes=10)
# The largest uuid: a cursor with it as ``after_id`` starts strictly after ``after_at``.
MAX_UUID = uuid.UUID(int=(1 << 128) - 1)


@dataclass(frozen=True)
class Promotion:
    """What a promotion did. ``moved`` maps every execution it moved to READY to its definition
    uri. Leased, ``fenced`` lists the shards whose grant was lost (nothing was promoted there)
    and ``refused`` how many due executions of those shards it therefore left to their new
    owner."""

    moved: dict[uuid.UUID, str] = field(default_factory=dict)
    fenced: list[int] = field(default_factory=list)
    refused: int = 0

    @property
    def promoted(self) -> int:
        return len(self.moved)

    def by_definition(self) -> Counter[str]:
        return Counter(self.moved.values())


@dataclass(frozen=True)
class DueSlice:
    """A part of one shard's due window: the SCHEDULED executions after (``after_at``,
    ``after_id``) in (executeAt, id) order, up to ``until`` included. ``MAX_UUID`` as
    ``after_id`` means strictly after ``after_at``."""

    shard_id: int
    after_at: datetime
    until: datetime
    after_id: uuid.UUID = MAX_UUID


DefinitionKey = tuple[str, str, int]
"""A definition version as an execution refers to it: (tenant, definition uri, version)."""


@dataclass(frozen=True)
class DueEntry:
    execution_id: uuid.UUID
    shard_id: int
    execute_at: datetime
    definition: DefinitionKey | None = None
    """What the execution will run: read with the row (its heap tuple is read anyway), so that
    a worker beside the scheduler can read the definition before the instant."""
    tenant: str = ""
    priority: int = 0
    """Read with the row too: an instant whose entries are not all of one tenant and one
    priority is promoted, never opened to the claims, which would take its rows in shard order
    (docs/scaling.md, "Claiming a herd without promoting it")."""
    limited: bool = False
    """Under a concurrency limit (set at submission, never changed): at an opened herd's
    instant only such rows, and rows a pause or a rate limit holds, need promoting; with no
    pause and no rate limit anywhere the scheduler sends only these (docs/scaling.md, "The
    herd's drain against a plain drain")."""


def hint_pairs(executions: Iterable[Execution | NewExecution]) -> list[tuple[int, datetime]]:
    """The (shard, executeAt) pairs to announce for freshly inserted executions (or for those
    about to be): SCHEDULED ones due within ``HINT_HORIZON`` of their submission, without
    duplicates."""
    pairs = {
        (e.shard_id, e.execute_at)
        for e in executions
        if e.status is ExecutionStatus.SCHEDULED and e.execute_at - e.created_at <= HINT_HORIZON
    }
    return sorted(pairs)


@dataclass(frozen=True)
class DueNews:
    """What an inbox received since it was last read: (shard, executeAt) pairs; spans
    (first, last executeAt) of inserts too spread to list, which concern every shard; and
    whether some hints may have been missed altogether."""

    pairs: list[tuple[int, datetime]] = field(default_factory=list)
    spans: list[tuple[datetime, datetime]] = field(default_factory=list)
    lost: bool = False
    poked: bool = False
    """Whether any DUE signal came (an insert, an execution gone to RETRY_WAIT or snoozed):
    the scheduler then asks for its next retry again (scheduler.py, ``_retry_stale``)."""


class DueHints:
    """One scheduler's inbox. Bounded: past ``limit`` hints it drops them all and says it lost
    some, because a reload is cheaper than an unbounded queue."""

    def __init__(self, limit: int = 100_000) -> None:
        self._limit = limit
        self._pairs: list[tuple[int, datetime]] = []
        self._spans: list[tuple[datetime, datetime]] = []
        self._lost = False
        self._poked = False

    def poke(self) -> None:
        self._poked = True

    def put(self, pairs: Iterable[tuple[int, datetime]]) -> None:
        if self._lost:
            return
        self._pairs.extend(pairs)
        self._check()

    def put_span(self, first: datetime, last: datetime) -> None:
        if not self._lost:
            self._spans.append((first, last))
            self._check()

    def lose(self) -> None:
        self._pairs.clear()
        self._spans.clear()
        self._lost = True

    def take(self) -> DueNews:
        news = DueNews(self._pairs, self._spans, self._lost, self._poked)
        self._pairs, self._spans, self._lost, self._poked = [], [], False, False
        return news

    def _check(self) -> None:
        if len(self._pairs) + len(self._spans) > self._limit:
            self.lose()


class DueFanout:
    """A store's publisher of due hints to every subscribed scheduler of this process."""

    def __init__(self) -> None:
        # Weak: a scheduler that is gone stops receiving without unsubscribing.
        self._subscribers: weakref.WeakSet[DueHints] = weakref.WeakSet()

    def subscribe(self) -> DueHints:
        hints = DueHints()
        self._subscribers.add(hints)
        return hints

    def publish(self, pairs: list[tuple[int, datetime]]) -> None:
        if pairs:
            for hints in list(self._subscribers):
                hints.put(pairs)

    def publish_span(self, first: datetime, last: datetime) -> None:
        for hints in list(self._subscribers):
            hints.put_span(first, last)

    def lose(self) -> None:
        for hints in list(self._subscribers):
            hints.lose()

    def poke(self) -> None:
        """A DUE signal, hints or not (``DueNews.poked``)."""
        for hints in list(self._subscribers):
            hints.poke()
