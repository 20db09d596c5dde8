"""The protocols of what the engine asks of a store. Each backend implements
``PromotionStore`` in ``promotion.py``, ``ShardLeaseStore`` in ``shard_leases.py`` and
``WorkerRegistryStore`` in ``workers.py``; ``ClaimStore`` and ``LeaseExpiryStore`` (the
worker's and the reaper's sides of a lease) in ``claims.py`` and the lease section of
``store.py``, which share the guarded writes of a RUNNING execution."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from tickwheel.domain.models import (
    Execution,
    ShardLease,
)
from tickwheel.store.due import DueEntry, DueHints, DueSlice, Promotion
from tickwheel.store.records import (
    AttemptResult,
    WorkerInfo,
)

RELEASED_AT_SHUTDOWN = "worker shut down"
"""The message of an attempt given back by a worker that stopped."""
RELEASED_UNSTARTED = "claimed ahead and not started within a third of its lease"
"""The message of an attempt a worker claimed ahead of its slots and gave back unstarted."""


class ClaimBatch(list[Execution]):
    """A claim's executions, with when to claim again when rate limits held some back."""

    retry_after: float | None = None
    """Seconds until the first empty rate-limit bucket has a token again (None: none empty). A
    worker whose claim came back short sleeps until then, or a wake-up, rather than polling."""

    def __init__(self, items: list[Execution], retry_after: float | None = None) -> None:
        super().__init__(items)
        self.retry_after = retry_after


def retry_after(claimed: list[Execution]) -> float | None:
    return claimed.retry_after if isinstance(claimed, ClaimBatch) else None


class ClaimStore(Protocol):
    """A worker's side of an execution: claimed, kept alive under its fencing token, finished or
    handed back."""

    async def execution_claim_ready(
        self,
        worker_id: str,
        limit: int,
        lease: timedelta,
        now: datetime | None = None,
        definition_uris: Sequence[str] | None = None,
    ) -> list[Execution]:
        """Claims up to ``limit`` READY executions (highest priority, then longest ready) in one
        short transaction: each becomes RUNNING with a new, strictly increasing fencing token, a
        lease, and a RUNNING Attempt row. ``now=None`` uses the database's clock.
        ``definition_uris`` limits the claim to those definitions (None: any). An execution
        under a rate limit starts only with a token of its buckets; when one is empty the answer
        may be a ``ClaimBatch`` whose ``retry_after`` says when its next token comes."""
        ...

    async def attempt_finish_many(
        self, results: Sequence[AttemptResult], now: datetime | None = None
    ) -> list[bool]:
        """Records attempts' outcomes in one transaction: per result, in order, whether it was
        recorded. Each is fenced on its own: a stale token is False and writes nothing, while
        the others commit, each with everything a finish writes (attempt row, execution status,
        output, workflow outbox row, wake-ups)."""
        ...

    async def execution_release(
        self,
        execution_id: uuid.UUID,
        fencing_token: int,
        now: datetime | None = None,
        why: str = RELEASED_AT_SHUTDOWN,
    ) -> bool:
        """RUNNING -> READY without burning an attempt (graceful shutdown, or claimed ahead and
        not started in time): the attempt is ABANDONED with ``why`` and the budget grows by
        one."""
        ...


class LeaseExpiryStore(Protocol):
    """The reaper's side: executions whose worker stopped renewing its lease."""

    async def execution_lease_expired(
        self, limit: int, now: datetime | None = None
    ) -> list[Execution]:
        """RUNNING executions whose lease ran out, oldest expiry first (the reaper's work)."""
        ...

    async def execution_lease_next(self, now: datetime | None = None) -> timedelta | None:
        """How long from ``now`` (else the database's clock) until the earliest lease of a
        RUNNING execution ends: negative when one has, None when nothing runs."""
        ...

    async def attempt_count_lost(self, execution_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, int]:
        """Per execution, how many of its attempts were lost to a worker's death (reaped
        ABANDONED, kind "lost") since it was last replayed; executions with none are left out.
        Counted apart from the handler's own failures, under ``retry.maxLostAttempts``."""
        ...

    async def execution_reap(
        self, results: Sequence[AttemptResult], now: datetime | None = None
    ) -> list[uuid.UUID]:
        """The reaper's batch in one conditional update: each result applies only while its
        execution is still RUNNING under that fencing token with its lease expired. Returns the
        executions it moved (the others were renewed or reaped by someone else meanwhile). A
        lost attempt is not the handler's failure: one moved to RETRY_WAIT is given back to the
        budget (``max_attempts`` grows by one), as a release gives it back."""
        ...


class PromotionStore(Protocol):
    """The scheduler's side: SCHEDULED and RETRY_WAIT executions made READY when due."""

    async def execution_promote_due(
        self, shards: Sequence[int], limit: int, now: datetime | None = None
    ) -> Promotion:
        """The catch-all: SCHEDULED rows whose executeAt has come and RETRY_WAIT rows whose
        nextAttemptAt has come -> READY, at most ``limit`` of each, only in ``shards``. Walks
        the partial due indexes shard by shard, so its cost follows the due rows."""
        ...

    async def execution_promote_ids(
        self, execution_ids: Sequence[uuid.UUID], shards: Sequence[int], now: datetime | None = None
    ) -> Promotion:
        """The timing wheel's firing: those of ``execution_ids`` still SCHEDULED, in ``shards``
        and due by ``now`` (None: the database's clock) -> READY, in one statement."""
        ...

    async def execution_promote_ids_leased(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        execution_ids: Sequence[uuid.UUID],
        now: datetime | None = None,
        *,
        direct: bool = False,
    ) -> Promotion:
        """``execution_promote_ids`` fenced like ``execution_promote_due_leased``, over the
        shards of ``leases`` (``refused`` is not counted here). ``direct``: the shards are open
        (``shard_lease_open``), and the rows the plain claim takes as they are (no concurrency
        limit, pause or rate limit over them) are left SCHEDULED for it."""
        ...

    async def execution_promote_due_leased(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        limit: int,
        now: datetime | None = None,
    ) -> Promotion:
        """``execution_promote_due`` fenced by shard leases: in one transaction, only in the
        shards whose lease ``owner`` still holds with the same epoch and unexpired (by the
        database's clock), which are locked against takeover until commit. When the batch of
        SCHEDULED rows came back short, the held shards' watermark becomes ``now``. When no row
        is due in any of the shards and none of them is open to the claims, nothing is locked
        or written (the watermark stays where the last promotion left it, still a bound up to
        which everything due was promoted): an idle scheduler's rounds cost reads only."""
        ...

    async def execution_due_window(
        self, slices: Sequence[DueSlice], limit: int
    ) -> list[list[DueEntry]]:
        """For each slice, in its order, its first ``limit`` SCHEDULED executions in
        (executeAt, id) order: a bounded walk of the due index that fills the scheduler's
        timing wheel. A slice that returns ``limit`` rows may have more after the last."""
        ...

    def due_hints(self) -> DueHints:
        """Subscribes to the (shard, executeAt) pairs of SCHEDULED executions inserted from now
        on (this process's and, on PostgreSQL, every process's): hints, possibly lost."""
        ...

    async def execution_next_retry_at(
        self, shards: Sequence[int], horizon: datetime
    ) -> datetime | None:
        """The earliest nextAttemptAt (RETRY_WAIT) before ``horizon``."""
        ...


class ShardLeaseStore(Protocol):
    """Schedulers sharing the shards: grants with an epoch, renewed, released, counted."""

    async def shard_lease_acquire(
        self, owner: str, shards_wanted: int, ttl: timedelta, now: datetime | None = None
    ) -> list[ShardLease]:
        """Up to ``shards_wanted`` free or expired shards, each a new grant (epoch + 1); also
        renews ``owner``'s membership, so the others count it even while it holds nothing."""
        ...

    async def shard_lease_renew(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        ttl: timedelta,
        now: datetime | None = None,
    ) -> list[ShardLease]:
        """Extends the grants still held (same owner and epoch, unexpired) and the membership;
        returns them. A grant missing from the answer is lost."""
        ...

    async def shard_lease_release(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        now: datetime | None = None,
        *,
        leaving: bool = False,
    ) -> None:
        """Frees the grants at once; ``leaving`` also ends the membership (shutdown)."""
        ...

    async def shard_lease_counts(self, now: datetime | None = None) -> dict[str, int]:
        """Live owners (membership unexpired) and how many live leases each holds."""
        ...

    async def shard_lease_open(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        through: datetime,
        now: datetime | None = None,
    ) -> list[int]:
        """Opens the shards of the grants still held (owner, epoch, unexpired by the database's
        clock) through ``through``, never past ``now`` (None: the database's clock) nor
        backwards: the plain claim then takes their due SCHEDULED rows up to it straight to
        RUNNING. Wakes the workers; returns the shards held."""
        ...

    async def shard_lease_grace(
        self,
        owner: str,
        leases: Sequence[ShardLease],
        through: datetime,
        now: datetime | None = None,
        *,
        counted: Collection[int] | None = None,
    ) -> tuple[int, list[int]]:
        """A herd's grace check in one statement (PostgreSQL; one transaction on SQLite): how
        many SCHEDULED executions due by ``through`` are left in the shards of ``leases`` (held
        or not; of a shard not in ``counted``, when given, 1 if any is left: it is only probed),
        and the shards closed, ascending: those of the grants still held (owner, epoch,
        unexpired by the database's clock; locked in shard order) that were opened through
        ``through`` at most and where none is left: the claims took, or the scheduler promoted,
        the rows of the instants they were opened for, and none due by ``through`` is left, not
        even past the instant their opening reached (a shard where the clock held the opening
        back), so that the count may skip the shards closed. A shard opened again by a later
        herd (through a later instant) stays open: that herd closes it."""
        ...


class WorkerRegistryStore(Protocol):
    """The worker registry, and the backlog figures read beside it."""

    # The worker registry: a row per worker, upserted every few seconds, never per claim.
    async def worker_heartbeat(
        self,
        worker_id: str,
        host: str,
        pid: int,
        concurrency: int,
        running: int,
        now: datetime | None = None,
    ) -> None:
        """Upserts the worker's row (``started_at`` from the first report only)."""
        ...

    async def worker_stopped(self, worker_id: str, now: datetime | None = None) -> None: ...

    async def worker_list(self, alive_since: datetime) -> list[WorkerInfo]:
        """Workers whose last report is at or after ``alive_since``, stopped ones included."""
        ...

    async def worker_count_alive(self, alive_since: datetime) -> int:
        """Workers that reported at or after ``alive_since`` and have not stopped."""
        ...

    async def execution_oldest_ready_at(self) -> datetime | None:
        """The longest-waiting READY execution's ``ready_at`` over all tenants (the backlog)."""
        ...

    async def concurrency_counts(self) -> tuple[int, int]:
        """(READY executions under a concurrency limit, slots held) over all tenants: the first
        are waiting for a slot or for their turn (the rest are claimed as soon as a worker
        looks), through the partial index of the groups' queues."""
        ...
