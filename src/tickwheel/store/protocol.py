"""The Store protocol: one interface, two backends (PostgreSQL, SQLite), one conformance suite.

Methods are named entity-first and each is one unit of work (its own transaction). State changes
are guarded: an update names the status it expects and the row count says who won, so a cancel
racing a claim has exactly one winner."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from tickwheel.domain.definitions import Definition
from tickwheel.domain.models import (
    ApiKey,
    Attempt,
    Execution,
    ExecutionEvent,
    ExecutionFilter,
    ShardLease,
)
from tickwheel.domain.states import (
    AttemptStatus,
    ExecutionStatus,
    require_attempt_transition,
    require_transition,
)
from tickwheel.domain.submission import NewExecution
from tickwheel.store.due import DueEntry, DueHints, DueSlice, Promotion
from tickwheel.store.running_protocol import RunningStore

SHARED = ""
"""The owner of the shared registry's definitions and workflows (published by the operator)."""


@dataclass(frozen=True)
class StoredDefinition:
    definition: Definition
    content_hash: str
    created_at: datetime
    owner: str
    """The tenant that registered it, or ``SHARED`` (''): the operator's shared registry."""


@dataclass(frozen=True)
class InsertOutcome:
    """``created`` is False when the (tenant, idempotency key) already named an execution; then
    ``execution`` is that earlier one and the caller compares fingerprints."""

    execution: Execution
    created: bool


@dataclass(frozen=True)
class AttemptResult:
    """What a worker reports about its attempt. The write is accepted only while the execution is
    still RUNNING under ``fencing_token``: a zombie with an older token changes nothing."""

    execution_id: uuid.UUID
    fencing_token: int
    attempt_status: AttemptStatus
    execution_status: ExecutionStatus
    output: Any = None
    output_reference: str | None = None
    error: dict[str, Any] | None = None
    next_attempt_at: datetime | None = None
    lease_expired_only: bool = False
    """The reaper's guard: write only if the lease is still expired (a late heartbeat wins)."""
    output_size: int = 0
    """Size of the output as JSON; with ``output_reference`` set, the store keeps the output
    out of the executions row, in its own table."""

    def __post_init__(self) -> None:
        # Only a RUNNING execution and its RUNNING attempt are finished (or reaped), and the
        # store's update writes whatever status it is given: the table decides which it may be.
        require_transition(ExecutionStatus.RUNNING, self.execution_status)
        require_attempt_transition(AttemptStatus.RUNNING, self.attempt_status)


@dataclass(frozen=True)
class WorkerInfo:
    """A worker's row of the registry, as it last reported itself."""

    worker_id: str
    host: str
    pid: int
    concurrency: int
    started_at: datetime
    last_heartbeat_at: datetime
    running: int
    stopped_at: datetime | None


class Topic(StrEnum):
    """Wake-up signals between processes. They are hints: a woken service always re-queries."""

    DUE = "due"
    """An execution was inserted SCHEDULED: a scheduler may need to wake before it planned to."""
    READY = "ready"
    """Executions became READY (inserted due, promoted, replayed, released): workers, claim."""
    WORKFLOW = "workflow"
    """A workflow's execution finished (an outbox row was written): orchestrators, consume."""
    CANCEL = "cancel"
    """A cancel of a RUNNING execution was requested: workers, beat now rather than later."""


class Store(RunningStore, Protocol):
    dialect: str

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """Raises when the database does not answer."""
        ...

    async def migrate(self) -> list[str]:
        """Applies pending migrations; returns the names applied."""
        ...

    async def migrations_pending(self) -> list[str]: ...

    # Definitions are immutable: insert never overwrites. They belong to ``owner`` (a tenant, or
    # SHARED). Every read takes the tenant and resolves a name in the store's one statement: the
    # tenant's own definition when it owns any version of the name, else the shared one; another
    # tenant's is never returned. The tenant SHARED resolves to the shared registry alone.
    async def definition_insert(self, stored: StoredDefinition) -> bool:
        """False when (owner, name, version) exists already (whatever its content), or when a
        tenant that owns no version of the name asks for a name of the shared registry."""
        ...

    async def definition_get(
        self, tenant: str, name: str, version: int | None = None
    ) -> StoredDefinition | None:
        """The definition ``name`` resolves to for ``tenant``; ``version=None`` is its latest."""
        ...

    async def definition_list(self, tenant: str) -> list[StoredDefinition]:
        """The latest version of each definition ``tenant`` resolves, by name."""
        ...

    async def definition_versions(self, tenant: str, name: str) -> list[StoredDefinition]:
        """Every version of the definition ``name`` resolves to for ``tenant``."""
        ...

    async def execution_insert_many(self, items: Sequence[NewExecution]) -> list[InsertOutcome]:
        """Inserts in one transaction; uniqueness of (tenant, idempotency_key) is the database's
        constraint, so concurrent identical submissions create one row."""
        ...

    async def execution_get(self, tenant: str, execution_id: uuid.UUID) -> Execution | None: ...

    async def execution_list(
        self,
        tenant: str,
        flt: ExecutionFilter,
        before: uuid.UUID | None,
        limit: int,
    ) -> list[Execution]:
        """Newest first, keyset-paged on the time-ordered id (never OFFSET)."""
        ...

    async def execution_cancel(
        self, tenant: str, execution_id: uuid.UUID, now: datetime
    ) -> Execution | None:
        """Cancels only from SCHEDULED, READY or RETRY_WAIT; None when the guard did not match."""
        ...

    async def execution_cancel_unstarted(
        self, tenant: str, execution_id: uuid.UUID, now: datetime
    ) -> Execution | None:
        """Cancels only from SCHEDULED or READY, never an execution that is or was running
        (a pause of its cron job must not stop work already under way); None otherwise."""
        ...

    async def execution_replay(
        self, tenant: str, execution_id: uuid.UUID, max_attempts: int, now: datetime
    ) -> Execution | None:
        """FAILED -> READY with ``max_attempts`` more attempts on top of those made; None when the
        guard did not match."""
        ...

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
        ``definition_uris`` limits the claim to those definitions (None: any)."""
        ...

    async def attempt_finish(self, result: AttemptResult, now: datetime | None = None) -> bool:
        """Records an attempt's outcome; False (and nothing written) when the token is stale."""
        ...

    async def attempt_finish_many(
        self, results: Sequence[AttemptResult], now: datetime | None = None
    ) -> list[bool]:
        """``attempt_finish`` for a batch, in one transaction: per result, in order, whether it
        was recorded. Each is fenced on its own: a stale token is False and writes nothing,
        while the others commit, each with everything a single finish writes (attempt row,
        execution status, output, workflow outbox row, wake-ups)."""
        ...

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
    ) -> Promotion:
        """``execution_promote_ids`` fenced like ``execution_promote_due_leased``, over the
        shards of ``leases`` (``refused`` is not counted here)."""
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
        SCHEDULED rows came back short, the held shards' watermark becomes ``now``."""
        ...

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

    async def execution_next_due_at(
        self, shards: Sequence[int], horizon: datetime
    ) -> datetime | None:
        """The earliest executeAt (SCHEDULED) or nextAttemptAt (RETRY_WAIT) before ``horizon``."""
        ...

    async def execution_next_retry_at(
        self, shards: Sequence[int], horizon: datetime
    ) -> datetime | None:
        """The earliest nextAttemptAt (RETRY_WAIT) before ``horizon``."""
        ...

    async def execution_heartbeat(
        self,
        execution_id: uuid.UUID,
        fencing_token: int,
        lease: timedelta,
        now: datetime | None = None,
    ) -> bool:
        """Extends the lease; False when the token is no longer current (stop working)."""
        ...

    async def execution_lease_expired(
        self, limit: int, now: datetime | None = None
    ) -> list[Execution]:
        """RUNNING executions whose lease ran out, oldest expiry first (the reaper's work)."""
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

    async def execution_release(
        self, execution_id: uuid.UUID, fencing_token: int, now: datetime | None = None
    ) -> bool:
        """RUNNING -> READY without burning an attempt (graceful shutdown): the attempt is
        ABANDONED and the budget grows by one."""
        ...

    async def execution_count_by_status(
        self, finished_since: datetime | None = None
    ) -> dict[ExecutionStatus, int]:
        """How many executions are in each status (every status present, zeros included), over
        all tenants. Non-terminal statuses are counted exactly, through their partial indexes;
        terminal ones only among executions finished at or after ``finished_since`` (None: all
        of them), so that the count stays cheap however much history is kept."""
        ...

    async def execution_prune(self, finished_before: datetime, limit: int) -> int:
        """Deletes up to ``limit`` terminal executions (SUCCEEDED, FAILED, CANCELLED) that
        finished before ``finished_before``, with their attempts, events and outputs; returns
        how many. One short statement per call: callers loop until a batch comes back short."""
        ...

    async def wait_for(self, topic: Topic, timeout: float) -> bool:
        """Sleeps until ``topic`` is signalled (True) or ``timeout`` seconds pass (False)."""
        ...

    async def execution_output_get(self, tenant: str, execution_id: uuid.UUID) -> Any:
        """The output kept by reference (None when there is none)."""
        ...

    async def attempt_list(self, tenant: str, execution_id: uuid.UUID) -> list[Attempt]: ...

    async def execution_event_list(
        self, tenant: str, execution_id: uuid.UUID
    ) -> list[ExecutionEvent]: ...

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

    async def api_key_insert(self, key: ApiKey, key_hash: str) -> None: ...

    async def api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        """Only keys that are not revoked."""
        ...

    async def api_key_list(self, tenant: str | None = None) -> list[ApiKey]: ...

    async def api_key_revoke(self, key_id: str, now: datetime) -> bool: ...

    async def api_key_count(self) -> int: ...
