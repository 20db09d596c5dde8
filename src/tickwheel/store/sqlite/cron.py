"""The Cron Service's tables on SQLite.

It shares the main store's one connection and its lock (``SqliteStore.cron`` builds it), so a
cron transaction and an execution insert made by the in-process client never interleave on the
connection. Write transactions are ``BEGIN IMMEDIATE``: a claim's select-then-update is one step
even against another process on the same file."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import aiosqlite

from tickwheel.domain.cron_jobs import AuditEntry, CronJob, OccurrenceRecord
from tickwheel.store.cron_protocol import ApplyBegun, CronAdvance, CronClaim, HistoryCursor
from tickwheel.store.sqlfile import load_queries
from tickwheel.store.sqlite.codec import from_us, to_us
from tickwheel.store.sqlite.connection import SqliteConnection
from tickwheel.store.sqlite.cron_rows import (
    advance_params,
    audit_params,
    audit_row,
    job_params,
    job_row,
    record_params,
    record_row,
)
from tickwheel.store.sqlite.webhooks import webhook_outbox_cron

Q = load_queries("tickwheel.store.sqlite.sql")


class SqliteCronStore(SqliteConnection):
    def __init__(
        self, conn: aiosqlite.Connection, lock: asyncio.Lock, wake: asyncio.Event | None = None
    ) -> None:
        super().__init__(conn, lock)
        self._wake = wake if wake is not None else asyncio.Event()
        """The main store's ``Topic.CRON`` event (``SqliteStore.cron``): set after a commit
        that changes what is due, in this process (SQLite has no notifications between
        processes; a Cron Service elsewhere wakes at its longest sleep)."""

    @asynccontextmanager
    async def _waking_tx(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._tx() as conn:
            yield conn
        self._wake.set()

    async def cron_wait(self, timeout: float) -> bool:
        if not self._wake.is_set():  # asyncio.wait_for(..., 0) gives up without looking
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                return False
        self._wake.clear()
        return True

    async def cron_job_next_due(
        self, lead: timedelta, tenant: str | None = None, now: datetime | None = None
    ) -> timedelta | None:
        # SQLite has no server clock: the processes sharing the file share this machine's.
        at = now or datetime.now(UTC)
        params = {"lead": lead // timedelta(microseconds=1), "tenant": tenant}
        row = await self._one("cron_job_next_due", params)
        if row is None or row["due"] is None:
            return None
        return from_us(int(row["due"])) - at

    async def cron_job_insert(self, job: CronJob, audit: AuditEntry) -> bool:
        async with self._waking_tx() as conn:
            cursor = await conn.execute(Q["cron_job_insert"], job_params(job))
            if cursor.rowcount != 1:
                return False
            await conn.execute(Q["cron_audit_insert"], audit_params(audit))
            return True

    async def cron_job_get(self, tenant: str, cron_job_id: uuid.UUID) -> CronJob | None:
        rows = await self._all("cron_job_get", {"tenant": tenant, "cron_job_id": str(cron_job_id)})
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
            rows = [record_params(r) for r in records]
            await conn.executemany(Q["cron_occurrence_insert_many"], rows)
            return job_row(row)

    async def cron_job_delete(
        self, tenant: str, cron_job_id: uuid.UUID, expected_version: int, audit: AuditEntry
    ) -> bool:
        params = {
            "tenant": tenant,
            "cron_job_id": str(cron_job_id),
            "expected_version": expected_version,
        }
        async with self._tx() as conn:
            cursor = await conn.execute(Q["cron_job_delete"], params)
            if cursor.rowcount != 1:
                return False
            await conn.execute(Q["cron_audit_insert"], audit_params(audit))
            return True

    async def cron_job_get_by_names(self, tenant: str, names: Sequence[str]) -> list[CronJob]:
        params = {"tenant": tenant, "names": json.dumps(list(names))}
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
        if not jobs:
            return set()
        ids = json.dumps([str(job.cron_job_id) for job in jobs])
        async with self._waking_tx() as conn:
            await conn.executemany(Q["cron_job_insert"], [job_params(j) for j in jobs])
            cursor = await conn.execute(Q["cron_job_present"], {"cron_job_ids": ids})
            inserted = {uuid.UUID(row["cron_job_id"]) for row in await cursor.fetchall()}
            rows = [audit_params(a) for a in audits if a.cron_job_id in inserted]
            await conn.executemany(Q["cron_audit_insert"], rows)
        return inserted

    async def cron_job_update_many(
        self, changes: Sequence[tuple[CronJob, int]], audits: Sequence[AuditEntry]
    ) -> set[uuid.UUID]:
        if not changes:
            return set()
        written: set[uuid.UUID] = set()
        async with self._waking_tx() as conn:
            for job, expected in changes:
                params = {**job_params(job), "expected_version": expected}
                cursor = await conn.execute(Q["cron_job_update"], params)
                if await cursor.fetchone() is not None:
                    written.add(job.cron_job_id)
            rows = [audit_params(a) for a in audits if a.cron_job_id in written]
            await conn.executemany(Q["cron_audit_insert"], rows)
        return written

    async def cron_job_delete_many(
        self,
        tenant: str,
        doomed: Sequence[tuple[uuid.UUID, int]],
        audits: Sequence[AuditEntry],
    ) -> set[uuid.UUID]:
        if not doomed:
            return set()
        pairs = json.dumps([[str(i), v] for i, v in doomed])
        async with self._tx() as conn:
            cursor = await conn.execute(
                Q["cron_job_delete_many"], {"tenant": tenant, "doomed": pairs}
            )
            deleted = {uuid.UUID(row["cron_job_id"]) for row in await cursor.fetchall()}
            rows = [audit_params(a) for a in audits if a.cron_job_id in deleted]
            await conn.executemany(Q["cron_audit_insert"], rows)
        return deleted

    async def cron_apply_begin(
        self, tenant: str, key: str, request_hash: str, now: datetime, stale: timedelta
    ) -> ApplyBegun:
        params = {"tenant": tenant, "apply_key": key, "request_hash": request_hash}
        async with self._tx() as conn:
            before = to_us(now - timedelta(days=1))
            await conn.execute(Q["cron_apply_forget"], {"tenant": tenant, "before": before})
            cursor = await conn.execute(Q["cron_apply_begin"], {**params, "now": to_us(now)})
            if cursor.rowcount == 1:
                return ApplyBegun("new")
            cursor = await conn.execute(Q["cron_apply_get"], params)
            row = await cursor.fetchone()
            assert row is not None  # inserted or present, under the write lock
            if row["request_hash"] != request_hash:
                return ApplyBegun("mismatch")
            if row["result"] is not None:
                return ApplyBegun("done", json.loads(row["result"]))
            if row["started_at"] > to_us(now - stale):
                return ApplyBegun("running")
            seen = {**params, "now": to_us(now), "seen_started_at": row["started_at"]}
            cursor = await conn.execute(Q["cron_apply_take_over"], seen)
            return ApplyBegun("new" if cursor.rowcount == 1 else "running")

    async def cron_apply_finish(self, tenant: str, key: str, result: dict[str, Any]) -> None:
        params = {"tenant": tenant, "apply_key": key, "result": json.dumps(result)}
        async with self._tx() as conn:
            await conn.execute(Q["cron_apply_finish"], params)

    async def cron_apply_abandon(self, tenant: str, key: str) -> None:
        async with self._tx() as conn:
            await conn.execute(Q["cron_apply_abandon"], {"tenant": tenant, "apply_key": key})

    async def cron_job_claim_due(
        self,
        owner: str,
        limit: int,
        lead: timedelta,
        lease: timedelta,
        tenant: str | None = None,
        now: datetime | None = None,
    ) -> CronClaim:
        # SQLite has no server clock: the processes sharing the file share this machine's.
        at = now or datetime.now(UTC)
        params = {
            "owner": owner,
            "claim_expires_at": to_us(at + lease),
            "horizon": to_us(at + lead),
            "now": to_us(at),
            "tenant": tenant,
            "limit": limit,
        }
        async with self._tx() as conn:
            cursor = await conn.execute(Q["cron_job_claim_due"], params)
            rows = await cursor.fetchall()
        jobs = sorted((job_row(r) for r in rows), key=_due_order)
        return CronClaim(jobs, at)

    async def cron_job_advance(
        self, owner: str, advance: CronAdvance, now: datetime | None = None
    ) -> bool:
        return advance.cron_job_id in await self.cron_job_advance_many(owner, [advance], now)

    async def cron_job_advance_many(
        self, owner: str, advances: Sequence[CronAdvance], now: datetime | None = None
    ) -> set[uuid.UUID]:
        if not advances:
            return set()
        ids = json.dumps(sorted(str(a.cron_job_id) for a in advances))
        moved: set[uuid.UUID] = set()
        async with self._tx() as conn:
            cursor = await conn.execute(Q["cron_job_lock_many"], {"cron_job_ids": ids})
            alive = {row["cron_job_id"] for row in await cursor.fetchall()}
            # A deleted job's history went with it: record nothing for it.
            records = [
                record_params(r) for a in advances if str(a.cron_job_id) in alive for r in a.records
            ]
            await conn.executemany(Q["cron_occurrence_insert_many"], records)
            await webhook_outbox_cron(
                conn, [r for a in advances if str(a.cron_job_id) in alive for r in a.records]
            )
            for advance in advances:
                if str(advance.cron_job_id) not in alive:
                    continue
                cursor = await conn.execute(
                    Q["cron_job_advance_many"], {**advance_params(advance), "owner": owner}
                )
                if await cursor.fetchone() is not None:
                    moved.add(advance.cron_job_id)
            lost = json.dumps(
                sorted(str(a.cron_job_id) for a in advances if a.cron_job_id not in moved)
            )
            await conn.execute(Q["cron_job_release_many"], {"cron_job_ids": lost, "owner": owner})
        return moved

    async def cron_job_release(self, owner: str, cron_job_ids: Sequence[uuid.UUID]) -> None:
        async with self._waking_tx() as conn:
            for job_id in cron_job_ids:
                await conn.execute(
                    Q["cron_job_release"], {"cron_job_id": str(job_id), "owner": owner}
                )

    async def cron_occurrences_record(self, records: Sequence[OccurrenceRecord]) -> set[uuid.UUID]:
        if not records:
            return set()
        ids = json.dumps(sorted({str(r.cron_job_id) for r in records}))
        async with self._tx() as conn:
            cursor = await conn.execute(Q["cron_job_lock_many"], {"cron_job_ids": ids})
            alive = {uuid.UUID(row["cron_job_id"]) for row in await cursor.fetchall()}
            rows = [record_params(r) for r in records if r.cron_job_id in alive]
            await conn.executemany(Q["cron_occurrence_insert_many"], rows)
            await webhook_outbox_cron(conn, [r for r in records if r.cron_job_id in alive])
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
            "cron_job_id": str(cron_job_id),
            "before_occurrence": to_us(before.occurrence) if before else None,
            "before_record_id": before.record_id if before else None,
            "limit": limit,
        }
        return [record_row(r) for r in await self._all("cron_occurrence_list", params)]

    async def cron_audit_list(
        self, tenant: str, cron_job_id: uuid.UUID, limit: int
    ) -> list[AuditEntry]:
        params = {"tenant": tenant, "cron_job_id": str(cron_job_id), "limit": limit}
        return [audit_row(r) for r in await self._all("cron_audit_list", params)]

    async def cron_history_prune(self, before: datetime, limit: int) -> int:
        params = {"before": to_us(before), "limit": limit}
        async with self._tx() as conn:
            history = await conn.execute(Q["cron_occurrence_prune"], params)
            audit = await conn.execute(Q["cron_audit_prune"], params)
            return history.rowcount + audit.rowcount

    async def cron_history_count_prunable(self, before: datetime) -> int:
        params = {"before": to_us(before)}
        history = await self._all("cron_occurrence_count_prunable", params)
        audit = await self._all("cron_audit_count_prunable", params)
        return int(history[0]["n"]) + int(audit[0]["n"])


def _due_order(job: CronJob) -> tuple[datetime, str]:
    return (job.next_run_at or datetime.max.replace(tzinfo=UTC), str(job.cron_job_id))
