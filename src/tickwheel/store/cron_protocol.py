"""The CronStore protocol: the Cron Service's own tables, beside (never inside) the Store.

Same conventions as ``store/protocol.py``: entity-first names, one unit of work per method, and
guarded updates whose row count says who won. Two guards matter here:

* a user's change names the ``version`` it read (optimistic concurrency: a stale edit changes
  nothing and the caller answers 409);
* the service's advance names the claim it holds, the version and the ``next_run_at`` it
  planned from, so a claim that expired and moved to another instance, or a job edited or paused
  meanwhile, makes the advance a no-op instead of moving the job past occurrences it never saw.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from tickwheel.domain.cron_jobs import AuditEntry, CronJob, OccurrenceRecord


@dataclass(frozen=True)
class CronClaim:
    """Jobs claimed for one tick, and the instant the claim was made by the database's clock
    (or the ``now`` passed in): the service plans with that instant, so every instance, whatever
    its own clock says, agrees on what is due."""

    jobs: list[CronJob]
    now: datetime


@dataclass(frozen=True)
class CronAdvance:
    """What one tick did for one claimed job: history rows to record and where to continue."""

    cron_job_id: uuid.UUID
    expected_version: int
    expected_next_run_at: datetime | None
    next_run_at: datetime | None
    last_occurrence: datetime | None = None
    last_execution_id: uuid.UUID | None = None
    last_workflow_run_id: uuid.UUID | None = None
    """With ``last_occurrence``, what it became: an execution or a workflow run (one of them)."""
    records: Sequence[OccurrenceRecord] = field(default_factory=tuple)


@dataclass(frozen=True)
class HistoryCursor:
    """Keyset position in a job's history, newest first: (occurrence, record id)."""

    occurrence: datetime
    record_id: int


@dataclass(frozen=True)
class ApplyBegun:
    """What ``cron_apply_begin`` found for an apply's idempotency key: ``new`` (go ahead, the
    key is now ours), ``running`` (a first try is still applying), ``done`` (its ``result``),
    or ``mismatch`` (the key was used for another request)."""

    state: Literal["new", "running", "done", "mismatch"]
    result: dict[str, Any] | None = None


class CronStore(Protocol):
    async def cron_job_insert(self, job: CronJob, audit: AuditEntry) -> bool:
        """False (nothing written) when the tenant already has a job of that name."""
        ...

    async def cron_job_get(self, tenant: str, cron_job_id: uuid.UUID) -> CronJob | None: ...

    async def cron_job_get_by_name(self, tenant: str, name: str) -> CronJob | None: ...

    async def cron_job_list(self, tenant: str, after_name: str | None, limit: int) -> list[CronJob]:
        """By name, keyset-paged (``after_name`` is the last name of the previous page)."""
        ...

    async def cron_job_update(
        self,
        job: CronJob,
        expected_version: int,
        audit: AuditEntry,
        records: Sequence[OccurrenceRecord] = (),
    ) -> CronJob | None:
        """Writes every user-settable column of ``job`` (and its status, next run, version) if
        the stored version is still ``expected_version``; records the audit entry and history
        rows in the same transaction. None when the guard did not match."""
        ...

    async def cron_job_delete(
        self, tenant: str, cron_job_id: uuid.UUID, expected_version: int, audit: AuditEntry
    ) -> bool:
        """Deletes the job and its history (the audit trail stays) if the version matches."""
        ...

    async def cron_job_get_by_names(self, tenant: str, names: Sequence[str]) -> list[CronJob]:
        """The tenant's jobs among ``names`` (any order; at most a few thousand names a call)."""
        ...

    async def cron_job_prunable(
        self, tenant: str, label: str | None, names: Sequence[str]
    ) -> list[CronJob]:
        """The tenant's jobs with ``label`` (None: without one) whose name is not in ``names``."""
        ...

    async def cron_job_insert_many(
        self, jobs: Sequence[CronJob], audits: Sequence[AuditEntry]
    ) -> set[uuid.UUID]:
        """``cron_job_insert`` for many jobs in one transaction (``audits[i]`` is ``jobs[i]``'s):
        the ids inserted; a job whose name is taken is left out, and so is its audit row."""
        ...

    async def cron_job_update_many(
        self, changes: Sequence[tuple[CronJob, int]], audits: Sequence[AuditEntry]
    ) -> set[uuid.UUID]:
        """``cron_job_update`` for many jobs in one transaction: each ``(job, expected_version)``
        is written if its stored version is still the expected one, and ``audits[i]`` (the
        audit row of ``changes[i]``) only if it was. Returns the ids written; a job changed or
        deleted meanwhile is left as it is."""
        ...

    async def cron_job_delete_many(
        self,
        tenant: str,
        doomed: Sequence[tuple[uuid.UUID, int]],
        audits: Sequence[AuditEntry],
    ) -> set[uuid.UUID]:
        """``cron_job_delete`` for many ``(cron_job_id, expected_version)`` in one transaction,
        each guarded on its own; ``audits[i]`` is written only if ``doomed[i]`` was deleted.
        Returns the ids deleted."""
        ...

    async def cron_apply_begin(
        self, tenant: str, key: str, request_hash: str, now: datetime, stale: timedelta
    ) -> ApplyBegun:
        """Starts the apply named ``key``, or says what became of an earlier one. A first try
        that left no result for ``stale`` (its process died) is taken over (``new``)."""
        ...

    async def cron_apply_finish(self, tenant: str, key: str, result: dict[str, Any]) -> None: ...

    async def cron_apply_abandon(self, tenant: str, key: str) -> None:
        """Forgets an apply that failed (nothing applied), so that a retry runs it again."""
        ...

    async def cron_job_claim_due(
        self,
        owner: str,
        limit: int,
        lead: timedelta,
        lease: timedelta,
        tenant: str | None = None,
        now: datetime | None = None,
    ) -> CronClaim:
        """Claims up to ``limit`` ACTIVE jobs that are due, oldest ``next_run_at`` first, and
        not claimed by a live lease: due means ``next_run_at <= now + lead`` for jobs that allow
        overlap and target a definition, ``<= now`` for the others (their overlap check must
        happen at fire time, and a workflow run starts when it is created).
        ``tenant=None`` claims jobs of every tenant. ``now=None`` uses the database's clock."""
        ...

    async def cron_job_next_due(
        self, lead: timedelta, tenant: str | None = None, now: datetime | None = None
    ) -> timedelta | None:
        """How long until ``cron_job_claim_due`` (same ``lead`` and ``tenant``) would find a job:
        the earliest due instant of an ACTIVE job (its ``next_run_at``, less the lead when it
        is claimed ahead), not before a live claim on it ends; minus ``now`` (the database's
        clock when None). Zero or negative: one is due already; None: no job will ever be."""
        ...

    async def cron_wait(self, timeout: float) -> bool:
        """Waits at most ``timeout`` seconds for a cron job of any tenant to be created,
        changed or given back (``Topic.CRON``, from any process on PostgreSQL, from this one
        on SQLite); True if one was. A hint: it may be lost, and a sleeper must wake anyway."""
        ...

    async def cron_job_advance_many(
        self, owner: str, advances: Sequence[CronAdvance], now: datetime | None = None
    ) -> set[uuid.UUID]:
        """For every job of a tick, in one transaction: records its history rows (each at most
        once), then moves the job on and releases the claim if the claim, version and next run
        are still those planned from. Each job is guarded on its own: returns the ids that moved
        on; the others keep their rows (their executions exist) and lose the claim if it is
        still ours. A tick of 50 jobs costs one round of statements instead of 50 transactions."""
        ...

    async def cron_job_release(self, owner: str, cron_job_ids: Sequence[uuid.UUID]) -> None:
        """Gives up claims without advancing (a tick that failed part-way)."""
        ...

    async def cron_occurrences_record(self, records: Sequence[OccurrenceRecord]) -> set[uuid.UUID]:
        """History rows outside a tick (what a pause cancelled, a trigger, a backfill), each at
        most once, without changing the jobs. The jobs are locked first (a delete in flight is
        waited for); a job that is gone gets none (its history went with it). Returns the ids
        of the jobs that got their rows."""
        ...

    async def cron_occurrence_list(
        self,
        tenant: str,
        cron_job_id: uuid.UUID,
        before: HistoryCursor | None,
        limit: int,
    ) -> list[OccurrenceRecord]:
        """Newest occurrence first, keyset-paged."""
        ...

    async def cron_audit_list(
        self, tenant: str, cron_job_id: uuid.UUID, limit: int
    ) -> list[AuditEntry]:
        """Oldest first."""
        ...

    async def cron_history_prune(self, before: datetime, limit: int) -> int:
        """Retention: deletes up to ``limit`` history rows recorded before ``before`` (never a
        job's newest row) and up to ``limit`` audit rows written before it, in one short
        transaction; returns how many rows went. Less than ``limit`` means both are done, so a
        caller loops until then (``engine.pruner.prune_cron``)."""
        ...

    async def cron_history_count_prunable(self, before: datetime) -> int:
        """How many history and audit rows ``cron_history_prune`` would delete now (dry run)."""
        ...
