"""Wake-up hints between processes through PostgreSQL's LISTEN/NOTIFY.

A store sends ``NOTIFY`` inside the transaction that made the change, so the signal is delivered
at commit, together with the rows, and never for a rolled-back change. Each store listens on one
dedicated autocommit connection (not from the pool: a listening session must stay the same
session), opened at the first wait; a background task turns notifications into one
``asyncio.Event`` per topic.

Signals are hints and may be lost (a dropped connection, a store not listening yet): a woken
service re-queries, and a waiting one polls at its timeout. Correctness never depends on them.
After a lost connection (a restart, a failover to the standby) the listener reconnects, to the
primary of a multi-host URL, and LISTENs again; everybody is woken once for what was missed.

Inserts of SCHEDULED executions also tell the schedulers *what* is due: the ``tickwheel_due``
payload lists (shard, executeAt) pairs after the origin, grouped by instant, so that the shard's
owner can fire them from its timing wheel instead of at its next window load. One NOTIFY per
insert batch; a list that would not fit PostgreSQL's 8000-byte payload is replaced by the span
of its instants (``~first:last``), which every scheduler loads for all its shards when the span
begins. A listener that was deaf for a while tells its subscribers they lost hints: they reload
their window from the database."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.generators import notifies

from tickwheel.domain.states import ExecutionStatus
from tickwheel.store.due import DueFanout, DueHints
from tickwheel.store.postgres.pool import KEEPALIVES, primary_conninfo
from tickwheel.store.protocol import Topic

log = logging.getLogger(__name__)

CHANNELS: dict[Topic, str] = {
    Topic.DUE: "tickwheel_due",
    Topic.READY: "tickwheel_ready",
    Topic.WORKFLOW: "tickwheel_workflow",
    Topic.CANCEL: "tickwheel_cancel",
    Topic.CRON: "tickwheel_cron",
    Topic.WEBHOOK: "tickwheel_webhook",
}
_TOPICS = {channel: topic for topic, channel in CHANNELS.items()}
# Named channels, one statement each: LISTEN takes an identifier, not a parameter.
_LISTEN = [f"LISTEN {channel}" for channel in CHANNELS.values()]
# One call per channel per transaction, however many rows changed (and PostgreSQL delivers
# identical notifications of one transaction once anyway).
_NOTIFY = "SELECT pg_notify(channel, %(payload)s) FROM unnest(%(channels)s::text[]) AS channel"
# Unless the URL says otherwise: notice a silently dead server within about a minute instead of
# waiting on a half-open socket forever (the pool's ``KEEPALIVES``), and give up a connect soon.
_LISTENER_DEFAULTS = {**KEEPALIVES, "connect_timeout": "10"}
# Reconnection attempts cost one connect each, and a listener deaf after the database came back
# (a restart, a failover) leaves every service polling: retry often.
_BACKOFF_FIRST = 0.5
_BACKOFF_MAX = 5.0
# How often the listener's wait wakes with nothing received (it needs no wake-up at all: a
# notification, a dropped connection or a cancellation each end the wait).
_LISTEN_INTERVAL = 3600.0
# The webhook senders' wake-up, sent by the outbox writes in the event's transaction (module
# functions without a store's origin: the writer's own listener hears it too, and its sender
# wakes a round trip later, as it would have at its next poll).
WAKE_WEBHOOK_SENDERS = f"SELECT pg_notify('{CHANNELS[Topic.WEBHOOK]}', '')"
# PostgreSQL refuses payloads of 8000 bytes or more; keep a margin.
PAYLOAD_LIMIT = 7900
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def _ms_up(at: datetime) -> int:
    return -((_EPOCH - at) // _MS)


def due_payload(origin: str, pairs: Sequence[tuple[int, datetime]]) -> str:
    """``origin`` then the pairs grouped by instant: ``<origin> <ms>:<shard>.<shard>;<ms>:...``
    with instants in Unix milliseconds rounded up, so that the receiver never acts before the
    instant. When that would not fit: ``<origin> ~<first ms>:<last ms>``, the span (rounded
    outward) that every receiver loads for all its shards."""
    if not pairs:
        return origin
    by_ms: dict[int, set[int]] = defaultdict(set)
    for shard, at in pairs:
        by_ms[_ms_up(at)].add(shard)
    listed = ";".join(
        f"{ms}:{'.'.join(map(str, sorted(shards)))}" for ms, shards in sorted(by_ms.items())
    )
    payload = f"{origin} {listed}"
    if len(payload) <= PAYLOAD_LIMIT:
        return payload
    first = min(at for _, at in pairs)
    return f"{origin} ~{(first - _EPOCH) // _MS}:{max(by_ms)}"


@dataclass(frozen=True)
class DuePayload:
    origin: str
    pairs: list[tuple[int, datetime]]
    span: tuple[datetime, datetime] | None = None
    unreadable: bool = False


def parse_due_payload(payload: str) -> DuePayload:
    """The parts of a ``due_payload``; ``unreadable`` when it cannot be read (the hints it
    carried are lost)."""
    origin, _, listed = payload.partition(" ")
    try:
        if listed.startswith("~"):
            first, _, last = listed[1:].partition(":")
            span = (_EPOCH + int(first) * _MS, _EPOCH + int(last) * _MS)
            return DuePayload(origin, [], span)
        pairs: list[tuple[int, datetime]] = []
        for group in listed.split(";") if listed else []:
            ms, _, shards = group.partition(":")
            at = _EPOCH + int(ms) * _MS
            pairs.extend((int(shard), at) for shard in shards.split("."))
    except ValueError:
        return DuePayload(origin, [], unreadable=True)
    return DuePayload(origin, pairs)


# Whom executions entering a status concern: workers (READY), schedulers (SCHEDULED).
# RETRY_WAIT wakes schedulers too: one asleep past the retry's time would otherwise oversleep it.
_STATUS_TOPICS = {
    ExecutionStatus.READY: Topic.READY,
    ExecutionStatus.SCHEDULED: Topic.DUE,
    ExecutionStatus.RETRY_WAIT: Topic.DUE,
}


def topics_for(statuses: Iterable[ExecutionStatus]) -> set[Topic]:
    """The topics to signal after executions entered ``statuses``."""
    return {_STATUS_TOPICS[s] for s in statuses if s in _STATUS_TOPICS}


_TOPICS_OF = {status: frozenset(topics_for((status,))) for status in ExecutionStatus}


def topics_of(status: ExecutionStatus) -> frozenset[Topic]:
    """``topics_for((status,))``, made once per status (a single insert's)."""
    return _TOPICS_OF[status]


class Signals:
    """One store's side of LISTEN/NOTIFY: sends its topics, and waits for anybody's."""

    def __init__(self, conninfo: str) -> None:
        # The pool's rule for several hosts: listen on the primary, where the NOTIFYs are sent.
        given = conninfo_to_dict(primary_conninfo(conninfo))
        self._conninfo = make_conninfo("", **{**_LISTENER_DEFAULTS, **given})
        # Our own notifications come back to our listener; they carry this id so that they are
        # not signalled twice (``signal`` already did it, right after the commit).
        self._origin = uuid.uuid4().hex
        self._events = {topic: asyncio.Event() for topic in Topic}
        self._listening = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._failures = 0
        self._retry_at = 0.0
        self._deaf_since_listening = False
        self._closed = False
        self._due = DueFanout()
        self._ready_only = json.dumps(
            [{"channel": CHANNELS[Topic.READY], "payload": self._origin, "status": "READY"}]
        )

    def subscribe_due(self) -> DueHints:
        """A scheduler's inbox of due hints, from this process and, once listening, others.
        Starts listening (in a running loop): hints sent before LISTEN took effect are lost,
        and the inbox is told so when it does."""
        hints = self._due.subscribe()
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no running loop: the first wait starts listening
            return hints
        self._start()
        return hints

    async def notify(
        self,
        conn: AsyncConnection[Any],
        topics: Iterable[Topic],
        due: Sequence[tuple[int, datetime]] = (),
    ) -> None:
        """Inside the caller's transaction: other processes' listeners hear it at commit.
        ``due`` lists the (shard, executeAt) pairs of SCHEDULED executions inserted."""
        channels = sorted(CHANNELS[t] for t in set(topics))
        if not channels:
            return
        if due and Topic.DUE in topics:
            channels.remove(CHANNELS[Topic.DUE])
            payload = due_payload(self._origin, due)
            await conn.execute(_NOTIFY, {"payload": payload, "channels": [CHANNELS[Topic.DUE]]})
        if channels:
            await conn.execute(_NOTIFY, {"payload": self._origin, "channels": channels})

    def notification(self, topic: Topic) -> tuple[str, str]:
        """The channel and payload of ``topic`` for a statement that NOTIFYs by itself."""
        return CHANNELS[topic], self._origin

    def insert_notifications(
        self, statuses: Iterable[ExecutionStatus], due: Sequence[tuple[int, datetime]]
    ) -> str:
        """The ``notify`` parameter of ``execution_insert``, which NOTIFYs inside the insert
        itself: for each status the batch may create, the channel it concerns and the payload
        (a JSON list of {channel, payload, status}), sent only if a row of that status is
        inserted. ``due``: the (shard, executeAt) pairs of the batch's SCHEDULED items (an item
        that turns out to repeat an earlier submission adds a hint that finds nothing: harmless)."""
        statuses = set(statuses)
        if statuses == {ExecutionStatus.READY}:
            return self._ready_only  # the common case, the same every time
        signals = []
        for status in sorted(statuses):
            topic = _STATUS_TOPICS.get(status)
            if topic is None:
                continue
            payload = due_payload(self._origin, due) if topic is Topic.DUE else self._origin
            signals.append({"channel": CHANNELS[topic], "payload": payload, "status": status.value})
        return json.dumps(signals)

    def insert_notifications_of(
        self, status: ExecutionStatus, due: Sequence[tuple[int, datetime]]
    ) -> str:
        """``insert_notifications`` of one item's ``status``: the READY one, a single
        submission's common case, without a set made and compared for it."""
        if status is ExecutionStatus.READY:
            return self._ready_only
        return self.insert_notifications((status,), due)

    def ready_wakeup(self) -> dict[str, str]:
        """The ``ready_channel`` and ``origin`` parameters of ``execution_finish_many``, which
        NOTIFYs the workers inside the finish itself when it freed a concurrency slot."""
        return {"ready_channel": CHANNELS[Topic.READY], "origin": self._origin}

    def signal(self, topics: Iterable[Topic], due: Sequence[tuple[int, datetime]] = ()) -> None:
        """In this process, after the commit: waiters here wake without a round trip, even
        before this store has started listening. Hints go to the inboxes before the wake-up,
        so that a woken scheduler finds them."""
        self._due.publish(list(due))
        if Topic.DUE in topics:
            self._due.poke()
        for topic in topics:
            self._events[topic].set()

    async def wait_for(self, topic: Topic, timeout: float) -> bool:
        self._start()
        event = self._events[topic]
        # Checked first: asyncio.wait_for with a timeout of 0 gives up without a look.
        if not event.is_set():
            try:
                await asyncio.wait_for(event.wait(), timeout)
            except TimeoutError:
                return False
        event.clear()
        return True

    def hearing(self) -> bool:
        """Whether LISTEN is in effect now: every notification sent from here on reaches this
        store until the connection drops, and its drop wakes every READY waiter."""
        return self._listening.is_set()

    async def listen(self, timeout: float) -> bool:
        """Starts listening now rather than at the first wait; True once LISTEN is in effect, so
        that no later notification is missed."""
        self._start()
        try:
            await asyncio.wait_for(self._listening.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            # wait() neither raises the task's cancellation nor swallows one of our own.
            await asyncio.wait([self._task])
            self._task = None

    def _received(self, channel: str, payload: str) -> None:
        topic = _TOPICS.get(channel)
        if topic is None:
            return
        due = parse_due_payload(payload) if topic is Topic.DUE else DuePayload(payload, [])
        if due.origin == self._origin:
            return  # ours: ``signal`` did it right after the commit
        if due.unreadable:
            self._due.lose()
        elif due.span is not None:
            self._due.publish_span(*due.span)
        else:
            self._due.publish(due.pairs)
        if topic is Topic.DUE:
            self._due.poke()
        self._events[topic].set()

    def _start(self) -> None:
        """(Re)starts the listener unless it runs, or failed lately and is backing off. While
        it is down, waits still end at their timeout, and callers poll."""
        if self._closed or (self._task is not None and not self._task.done()):
            return
        if time.monotonic() < self._retry_at:
            return
        self._task = asyncio.create_task(self._listen(), name="tickwheel-pg-listener")

    async def _listen(self) -> None:
        conn: AsyncConnection[Any] | None = None
        try:
            conn = await AsyncConnection.connect(self._conninfo, autocommit=True)
            # A handler, set before LISTEN, gets every notification the connection reads (also
            # one read while a LISTEN runs); with none, psycopg would queue them in a backlog.
            conn.add_notify_handler(lambda n: self._received(n.channel, n.payload))
            for statement in _LISTEN:
                await conn.execute(statement)
            self._failures = 0
            # Due hints sent before LISTEN took effect (or while the connection was down) are
            # lost: the schedulers' inboxes say so, and they reload their windows.
            self._due.lose()
            if self._deaf_since_listening:
                # Notifications sent while the connection was down are lost: wake everybody
                # once so that they re-query.
                self.signal(Topic)
            self._listening.set()
            while True:
                # Reads what arrives and hands it to the handler: ``conn.notifies()`` without its
                # wake-up every 0.1 s (a Ctrl-C check asyncio does not need: cancelling the task
                # ends the wait). Ten wake-ups a second were ~3.5 ms of CPU a second in an idle
                # process. A lost connection raises here.
                await conn.wait(notifies(conn.pgconn), interval=_LISTEN_INTERVAL)
        except Exception as exc:
            self._failures += 1
            delay = min(_BACKOFF_MAX, _BACKOFF_FIRST * 2 ** (self._failures - 1))
            self._retry_at = time.monotonic() + delay
            log.warning(
                "not listening for PostgreSQL notifications (%s: %s); retrying in %.1f s",
                type(exc).__name__,
                exc,
                delay,
            )
        finally:
            if self._listening.is_set():
                self._deaf_since_listening = True
                self._listening.clear()
                # Workers wait long between polls while this store hears (``hearing``): woken
                # now, they claim once and then poll at their short interval until it is back.
                self._events[Topic.READY].set()
            if conn is not None:
                await conn.close()
