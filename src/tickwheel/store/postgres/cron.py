"""The Cron Service's tables on PostgreSQL.

Built on the main store's pool (``PostgresCronStore(store.pool)``), autocommit like it: a
one-statement method is its own transaction, the others open one. Any number of ``tickwheel
cron`` instances share the tables; ``cron_job_claim_due`` hands each a disjoint batch with
``FOR UPDATE SKIP LOCKED`` and a lease, and the advance is guarded by that lease."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from tickwheel.domain.cron_jobs import AuditEntry, CronJob, OccurrenceRecord
from tickwheel.store.cron_protocol import CronAdvance, CronClaim, HistoryCursor
from tickwheel.store.postgres.cron_applies import PostgresCronApplies
from tickwheel.store.postgres.cron_rows import (
    advance_columns,
    audit_params,
    audit_row,
    job_params,
    job_row,
    occurrence_columns,
    record_row,
    utc,
)
from tickwheel.store.postgres.notify import Signals
from tickwheel.store.postgres.webhooks import webhook_outbox_cron
from tickwheel.store.protocol import Topic
from tickwheel.store.sqlfile import load_queries

Q = load_queries("tickwheel.store.postgres.sql")

MAX_REMEMBERED = 200_000
"""Jobs a cron store remembers at most (about 1 KB each); past it, it starts afresh."""

Conn = AsyncConnection[DictRow]


class PostgresCronStore(PostgresCronApplies):
    def __init__(self, pool: AsyncConnectionPool[Conn], signals: Signals | None = None) -> None:
        self._pool = pool
        self._signals = signals
        """The main store's LISTEN/NOTIFY (``cron_store_for``); None: changes wake nobody, and
        ``cron_wait`` just waits out its timeout."""
        self._jobs: dict[uuid.UUID, CronJob] = {}
        """Jobs claimed before, by id, at the version they had: a claim returns only the
        columns a tick changes without a new version (next run, last run), and reads a whole
        row only for a job it has not seen at that version. Converting 500 whole rows (two
        JSON columns each) was a quarter of a busy ``cron run``'s CPU."""

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[Conn]:
        async with self._pool.connection() as conn, conn.transaction():
            yield conn

    @asynccontextmanager
    async def _waking_tx(self) -> AsyncIterator[Conn]:
        """A transaction that changes what is due: it NOTIFYs ``Topic.CRON`` (delivered at
        commit, never for a rollback) and, once committed, wakes this process's services."""
        async with self._tx() as conn:
            yield conn
            if self._signals is not None:
                await self._signals.notify(conn, {Topic.CRON})
        if self._signals is not None:
            self._signals.signal({Topic.CRON})

    async def cron_wait(self, timeout: float) -> bool:
        if self._signals is None:
            await asyncio.sleep(timeout)
            return False
        return await self._signals.wait_for(Topic.CRON, timeout)

    async def cron_job_next_due(
        self, lead: timedelta, tenant: str | None = None, now: datetime | None = None
    ) -> timedelta | None:
        rows = await self._all("cron_job_next_due", {"lead": lead, "tenant": tenant, "now": now})
        wait: timedelta | None = rows[0]["wait"] if rows else None
        return wait

    async def _all(self, query: str, params: dict[str, Any]) -> list[DictRow]:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q[query], params)
            return await cursor.fetchall()

    async def cron_job_insert(self, job: CronJob, audit: AuditEntry) -> bool:
        async with self._waking_tx() as conn:
            cursor = await conn.execute(Q["cron_job_insert"], job_params(job))
            if cursor.rowcount != 1:
                return False
            await conn.execute(Q["cron_audit_insert"], audit_params(audit))
            return True

    async def cron_job_get(self, tenant: str, cron_job_id: uuid.UUID) -> CronJob | None:
        rows = await self._all("cron_job_get", {"tenant": tenant, "cron_job_id": cron_job_id})
        return job_row(rows[0]) if rows else None

    async def cron_job_get_by_name(self, tenant: str, name: str) -> CronJob | None:
        rows = await self._all("cron_job_get_by_name", {"tenant": tenant, "name": name})
        return job_row(rows[0]) if rows else None

    async def cron_job_list(self, tenant: str, after_name: str | None, limit: int) -> list[CronJob]:
        params = {"tenant": tenant, "after_name": after_name, "limit": limit}
        return [job_row(r) for r in await self._all("cron_job_list", params)]

    async def cron_job_update(
        self,
        job: CronJob,
        expected_version: int,
        audit: AuditEntry,
        records: Sequence[OccurrenceRecord] = (),
    ) -> CronJob | None:
        async with self._waking_tx() as conn:
            params = {**job_params(job), "expected_version": expected_version}
            cursor = await conn.execute(Q["cron_job_update"], params)
            row = await cursor.fetchone()
            if row is None:
                return None
            await conn.execute(Q["cron_audit_insert"], audit_params(audit))
            if records:
                await conn.execute(Q["cron_occurrence_insert_many"], occurrence_columns(records))
            return job_row(row)

    async def cron_job_delete(
        self, tenant: str, cron_job_id: uuid.UUID, expected_version: int, audit: AuditEntry
    ) -> bool:
        params = {
            "tenant": tenant,
            "cron_job_id": cron_job_id,
            "expected_version": expected_version,
        }
        async with self._tx() as conn:
            cursor = await conn.execute(Q["cron_job_delete"], params)
            if cursor.rowcount != 1:
                return False
            await conn.execute(Q["cron_audit_insert"], audit_params(audit))
            return True

    async def cron_job_get_by_names(self, tenant: str, names: Sequence[str]) -> list[CronJob]:
        params = {"tenant": tenant, "names": list(names)}
        return [job_row(r) for r in await self._all("cron_job_get_by_names", params)]

    async def cron_job_prunable(
        self, tenant: str, label: str | None, names: Sequence[str]
    ) -> list[CronJob]:
        rows = await self._all("cron_job_names_by_label", {"tenant": tenant, "label": label})
        declared = set(names)
        doomed = sorted(r["name"] for r in rows if r["name"] not in declared)
        found: list[CronJob] = []
        for start in range(0, len(doomed), 1000):
            found += await self.cron_job_get_by_names(tenant, doomed[start : start + 1000])
        return sorted(found, key=lambda job: job.name)

    async def cron_job_insert_many(
        self, jobs: Sequence[CronJob], audits: Sequence[AuditEntry]
    ) -> set[uuid.UUID]:
        """One transaction, the inserts pipelined (``executemany``); which ids made it is read
        back, and only their audit rows are written."""
        if not jobs:
            return set()
        ids = [job.cron_job_id for job in jobs]
        async with self._waking_tx() as conn:
            async with conn.cursor() as cur:
                await cur.executemany(Q["cron_job_insert"], [job_params(j) for j in jobs])
            cursor = await conn.execute(Q["cron_job_present"], {"cron_job_ids": ids})
            inserted: set[uuid.UUID] = {row["cron_job_id"] for row in await cursor.fetchall()}
            rows = [audit_params(a) for a in audits if a.cron_job_id in inserted]
            if rows:
                async with conn.cursor() as cur:
                    await cur.executemany(Q["cron_audit_insert"], rows)
        return inserted

    async def cron_job_update_many(
        self, changes: Sequence[tuple[CronJob, int]], audits: Sequence[AuditEntry]
    ) -> set[uuid.UUID]:
        """The guarded updates pipelined in one transaction (``executemany``), each returning
        its id when it matched; then the audit rows of those."""
        if not changes:
            return set()
        params = [{**job_params(job), "expected_version": v} for job, v in changes]
        written: set[uuid.UUID] = set()
        async with self._waking_tx() as conn, conn.cursor() as cur:
            await cur.executemany(Q["cron_job_update"], params, returning=True)
            while True:
                row = await cur.fetchone()
                if row is not None:
                    written.add(row["cron_job_id"])
                if not cur.nextset():
                    break
            rows = [audit_params(a) for a in audits if a.cron_job_id in written]
            if rows:
                await cur.executemany(Q["cron_audit_insert"], rows)
        return written

    async def cron_job_delete_many(
        self,
        tenant: str,
        doomed: Sequence[tuple[uuid.UUID, int]],
        audits: Sequence[AuditEntry],
    ) -> set[uuid.UUID]:
        if not doomed:
            return set()
        params = {
            "tenant": tenant,
            "cron_job_ids": [i for i, _ in doomed],
            "expected_versions": [v for _, v in doomed],
        }
        async with self._tx() as conn, conn.cursor() as cur:
            await cur.execute(Q["cron_job_delete_many"], params)
            deleted: set[uuid.UUID] = {row["cron_job_id"] for row in await cur.fetchall()}
            rows = [audit_params(a) for a in audits if a.cron_job_id in deleted]
            if rows:
                await cur.executemany(Q["cron_audit_insert"], rows)
        return deleted

    async def cron_job_claim_due(
        self,
        owner: str,
        limit: int,
        lead: timedelta,
        lease: timedelta,
        tenant: str | None = None,
        now: datetime | None = None,
    ) -> CronClaim:
        params = {
            "owner": owner,
            "lead": lead,
            "lease": lease,
            "tenant": tenant,
            "limit": limit,
            "now": now,
        }
        if len(self._jobs) >= MAX_REMEMBERED:  # before the claim: its jobs must stay known
            self._jobs.clear()
        async with self._tx() as conn:
            cursor = await conn.execute(Q["cron_job_claim_due"], params)
            rows = await cursor.fetchall()
            unknown = [r["cron_job_id"] for r in rows if not self._known(r)]
            if unknown:
                cursor = await conn.execute(Q["cron_job_get_by_ids"], {"cron_job_ids": unknown})
                self._remember([job_row(r) for r in await cursor.fetchall()])
        if not rows:
            return CronClaim([], now or await self._db_now())
        jobs = sorted((self._claimed(r) for r in rows), key=_due_order)
        return CronClaim(jobs, rows[0]["claimed_at"])

    def _known(self, row: DictRow) -> bool:
        job = self._jobs.get(row["cron_job_id"])
        return job is not None and job.version == row["version"]

    def _remember(self, jobs: Sequence[CronJob]) -> None:
        self._jobs.update((job.cron_job_id, job) for job in jobs)

    def _claimed(self, row: DictRow) -> CronJob:
        """The job as claimed: what only a new version changes from the remembered job, the
        rest (the columns a tick moves on without a new version) from the claim's row."""
        return dataclasses.replace(
            self._jobs[row["cron_job_id"]],
            next_run_at=utc(row["next_run_at"]),
            last_occurrence=utc(row["last_occurrence"]),
            last_execution_id=row["last_execution_id"],
            last_workflow_run_id=row["last_workflow_run_id"],
        )

    async def _db_now(self) -> datetime:
        async with self._pool.connection() as conn:
            cursor = await conn.execute("SELECT now() AS now")
            row = await cursor.fetchone()
        assert row is not None
        value: datetime = row["now"]
        return value

    async def cron_job_advance(
        self, owner: str, advance: CronAdvance, now: datetime | None = None
    ) -> bool:
        return advance.cron_job_id in await self.cron_job_advance_many(owner, [advance], now)

    async def cron_job_advance_many(
        self, owner: str, advances: Sequence[CronAdvance], now: datetime | None = None
    ) -> set[uuid.UUID]:
        """One transaction and four statements for a whole tick, whatever its size: the row
        locks, the history rows, the guarded updates, the release of the claims that lost."""
        if not advances:
            return set()
        ids = [a.cron_job_id for a in advances]
        async with self._tx() as conn:
            cursor = await conn.execute(Q["cron_job_lock_many"], {"cron_job_ids": ids})
            alive = {row["cron_job_id"] for row in await cursor.fetchall()}
            # A deleted job's history went with it: record nothing for it.
            records = [r for a in advances if a.cron_job_id in alive for r in a.records]
            if records:
                await conn.execute(Q["cron_occurrence_insert_many"], occurrence_columns(records))
                await webhook_outbox_cron(conn, records)
            cursor = await conn.execute(
                Q["cron_job_advance_many"],
                {
                    **advance_columns([a for a in advances if a.cron_job_id in alive]),
                    "owner": owner,
                },
            )
            moved: set[uuid.UUID] = {row["cron_job_id"] for row in await cursor.fetchall()}
            lost = [i for i in ids if i not in moved]
            if lost:
                await conn.execute(
                    Q["cron_job_release_many"], {"cron_job_ids": lost, "owner": owner}
                )
        return moved

    async def cron_job_release(self, owner: str, cron_job_ids: Sequence[uuid.UUID]) -> None:
        if not cron_job_ids:
            return
        async with self._waking_tx() as conn, conn.cursor() as cur:
            await cur.executemany(
                Q["cron_job_release"], [{"cron_job_id": i, "owner": owner} for i in cron_job_ids]
            )

    async def cron_occurrences_record(self, records: Sequence[OccurrenceRecord]) -> set[uuid.UUID]:
        if not records:
            return set()
        ids = sorted({r.cron_job_id for r in records})
        async with self._tx() as conn:
            cursor = await conn.execute(Q["cron_job_lock_many"], {"cron_job_ids": ids})
            alive: set[uuid.UUID] = {row["cron_job_id"] for row in await cursor.fetchall()}
            rows = [r for r in records if r.cron_job_id in alive]
            if rows:
                await conn.execute(Q["cron_occurrence_insert_many"], occurrence_columns(rows))
                await webhook_outbox_cron(conn, rows)
        return alive

    async def cron_occurrence_list(
        self,
        tenant: str,
        cron_job_id: uuid.UUID,
        before: HistoryCursor | None,
        limit: int,
    ) -> list[OccurrenceRecord]:
        params = {
            "tenant": tenant,
            "cron_job_id": cron_job_id,
            "before_occurrence": before.occurrence if before else None,
            "before_record_id": before.record_id if before else None,
            "limit": limit,
        }
        return [record_row(r) for r in await self._all("cron_occurrence_list", params)]

    async def cron_audit_list(
        self, tenant: str, cron_job_id: uuid.UUID, limit: int
    ) -> list[AuditEntry]:
        params = {"tenant": tenant, "cron_job_id": cron_job_id, "limit": limit}
        return [audit_row(r) for r in await self._all("cron_audit_list", params)]

    async def cron_history_prune(self, before: datetime, limit: int) -> int:
        params = {"before": before, "limit": limit}
        async with self._tx() as conn:
            history = await conn.execute(Q["cron_occurrence_prune"], params)
            audit = await conn.execute(Q["cron_audit_prune"], params)
            return history.rowcount + audit.rowcount

    async def cron_history_count_prunable(self, before: datetime) -> int:
        params = {"before": before}
        history = await self._all("cron_occurrence_count_prunable", params)
        audit = await self._all("cron_audit_count_prunable", params)
        return int(history[0]["n"]) + int(audit[0]["n"])


def _due_order(job: CronJob) -> tuple[datetime, str]:
    return (job.next_run_at or datetime.max.replace(tzinfo=UTC), str(job.cron_job_id))
