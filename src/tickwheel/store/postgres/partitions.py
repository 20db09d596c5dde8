"""Monthly partitioning of the executions table: an option of PostgreSQL installs with a large
run history (docs/scaling.md, "Partitioning").

The partition key is ``execution_id``: a UUIDv7 begins with its creation time, so one month's ids
are one contiguous range and a row never moves between partitions (its id never changes). The
primary key stays ``execution_id`` alone, and every query keeps its shape. Two things cannot stay
as they were on a partitioned table, and the conversion replaces them (triggers from migration
0010): the ``(tenant, idempotency_key)`` unique constraint becomes the ``execution_keys`` table,
and the foreign keys of attempts, events and outputs become a delete trigger, so that dropping a
month never makes PostgreSQL join those tables against it under an exclusive lock.

A month may be dropped only once every execution created in it is terminal and finished before
the retention cut-off: the same rows the pruner would delete. Long-future executions keep the
month they were created in alive until they have run; ``drop`` checks, under the parent's lock,
and refuses such a month instead of losing them."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import AsyncConnection, errors, sql
from psycopg.rows import DictRow
from psycopg_pool import AsyncConnectionPool

from tickwheel.domain.retention import DROP_BATCH
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.protocol import Store
from tickwheel.store.sqlfile import load_queries

Q = load_queries("tickwheel.store.postgres.sql")
Conn = AsyncConnection[DictRow]

PARENT = "executions"
DEFAULT_PARTITION = "executions_default"
# The tables whose rows hang off an execution by execution_id: their foreign keys are what the
# conversion replaces, and dropping a month first deletes their rows of that month's range.
CHILD_TABLES = ("attempts", "execution_events", "execution_outputs")
KEYS_TABLE = "execution_keys"
DEFAULT_LOCK_TIMEOUT = "5s"
DEFAULT_BATCH = DROP_BATCH
_UUID = r"'([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})'"
_BOUND = re.compile(rf"FOR VALUES FROM \({_UUID}\) TO \({_UUID}\)")


class PartitioningError(RuntimeError):
    """A partition command that cannot do what was asked; the message says why and what to do."""


class PartitioningUnsupported(PartitioningError):
    pass


# -- months and bounds ----------------------------------------------------------------------------


def month_start(at: datetime) -> datetime:
    at = at.astimezone(UTC)
    return datetime(at.year, at.month, 1, tzinfo=UTC)


def add_months(month: datetime, n: int) -> datetime:
    index = month.year * 12 + month.month - 1 + n
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def uuid7_floor(at: datetime) -> uuid.UUID:
    """The lowest UUIDv7 of ``at``'s millisecond: every id made at or after ``at`` sorts at or
    above it (PostgreSQL compares uuid bytewise, the time first)."""
    delta = at - datetime(1970, 1, 1, tzinfo=UTC)
    ms = (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    return uuid.UUID(int=ms << 80)


def uuid7_time(value: uuid.UUID) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=value.int >> 80)


def partition_name(month: datetime) -> str:
    return f"executions_p{month:%Y%m}"


# -- results --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Partition:
    name: str
    start: datetime | None  # None: the default partition
    end: datetime | None
    rows_estimate: int  # -1: never analysed
    bytes: int

    @property
    def is_default(self) -> bool:
        return self.start is None


@dataclass(frozen=True)
class EnableReport:
    rows: int
    partitions: list[str]
    seconds: float


@dataclass
class EnsureReport:
    created: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DropOutcome:
    partition: str
    dropped: bool
    live: int
    recent: int
    reason: str = ""


# -- the maintenance operations -------------------------------------------------------------------


def partitions_for(store: Store) -> ExecutionPartitions:
    if isinstance(store, PostgresStore):
        return ExecutionPartitions(store.pool)
    raise PartitioningUnsupported(
        "partitioning is a PostgreSQL option: the SQLite store keeps executions in one table"
    )


class ExecutionPartitions:
    def __init__(
        self, pool: AsyncConnectionPool[Conn], *, lock_timeout: str = DEFAULT_LOCK_TIMEOUT
    ) -> None:
        self._pool = pool
        self.lock_timeout = lock_timeout

    @asynccontextmanager
    async def _ddl(self) -> AsyncIterator[Conn]:
        """A transaction whose lock waits give up after ``lock_timeout`` with a clear error."""
        try:
            async with self._pool.connection() as conn, conn.transaction():
                await conn.execute(Q["partition_lock_timeout"], {"timeout": self.lock_timeout})
                yield conn
        except errors.LockNotAvailable as exc:
            raise PartitioningError(
                f"executions is busy: no lock within {self.lock_timeout} (long transactions"
                " running?); gave up before changing the table, try again later"
            ) from exc

    async def layout(self) -> str:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q["partition_layout"])
            row = await cursor.fetchone()
        return str(row["layout"]) if row else "plain"

    async def _require_partitioned(self) -> None:
        if await self.layout() != "partitioned":
            raise PartitioningError(
                "the executions table is not partitioned: run 'tickwheel db partitions enable'"
                " first (see docs/scaling.md)"
            )

    async def list_partitions(self) -> list[Partition]:
        await self._require_partitioned()
        async with self._pool.connection() as conn:
            rows = await (await conn.execute(Q["partition_list"])).fetchall()
        found = [_partition(r) for r in rows]
        # Months in order, the default last.
        earliest = datetime.min.replace(tzinfo=UTC)
        return sorted(found, key=lambda p: (p.start is None, p.start or earliest, p.name))

    # -- enable ---------------------------------------------------------------------------------

    async def enable(self, now: datetime, ahead: int = 3, *, force: bool = False) -> EnableReport:
        """Converts the plain executions table to monthly partitions, in one transaction under an
        exclusive lock: a maintenance window, with schedulers and workers stopped. All or
        nothing: a failure leaves the plain table as it was."""
        if ahead < 0:
            raise PartitioningError("--ahead must be 0 or more")
        if await self.layout() == "partitioned":
            raise PartitioningError("the executions table is already partitioned")
        if not force:
            await self._refuse_if_busy(now)
        started = time.monotonic()
        async with self._ddl() as conn:
            await conn.execute(Q["partition_enable_lock"])
            references = await _references(conn)
            await _check_convertible(conn, references)
            months_rows = await (await conn.execute(Q["partition_months_in_use"])).fetchall()
            indexes = await (await conn.execute(Q["partition_index_definitions"])).fetchall()
            await conn.execute(Q["partition_enable_prepare"])
            parent = sql.Identifier("executions_partitioned")
            await conn.execute(
                sql.SQL(Q["partition_create_default"]).format(
                    partition=sql.Identifier(DEFAULT_PARTITION), parent=parent
                )
            )
            current = month_start(now)
            months = {month_start(r["month"]) for r in months_rows}
            months.update(add_months(current, i) for i in range(ahead + 1))
            for month in sorted(months):
                await _create_month(conn, month, parent)
            rows = (await conn.execute(Q["partition_copy_rows"])).rowcount
            await conn.execute(Q["partition_copy_keys"])
            for table, constraint in references:
                await conn.execute(
                    sql.SQL(Q["partition_drop_reference"]).format(
                        table=sql.Identifier(table), constraint=sql.Identifier(constraint)
                    )
                )
            await conn.execute(Q["partition_swap"])
            for index in indexes:
                await conn.execute(str(index["definition"]))
            await conn.execute(Q["partition_finish"])
        names = [partition_name(m) for m in sorted(months)] + [DEFAULT_PARTITION]
        return EnableReport(rows=rows, partitions=names, seconds=time.monotonic() - started)

    async def _refuse_if_busy(self, now: datetime) -> None:
        params = {"now": now, "since": now - timedelta(seconds=60)}
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q["partition_enable_blockers"], params)
            busy = [str(r["who"]) for r in await cursor.fetchall()]
        if busy:
            shown = ", ".join(busy[:5]) + (f" and {len(busy) - 5} more" if len(busy) > 5 else "")
            raise PartitioningError(
                f"still running against this database: {shown}. Enabling partitioning rewrites"
                " the executions table under an exclusive lock; stop schedulers and workers"
                " first (or pass --force to wait for the lock anyway)"
            )

    # -- ensure ---------------------------------------------------------------------------------

    async def ensure(self, now: datetime, ahead: int = 3) -> EnsureReport:
        """Creates the partitions of this month and the next ``ahead`` ones that do not exist
        yet, each in its own short transaction. Idempotent: run it daily."""
        if ahead < 0:
            raise PartitioningError("--ahead must be 0 or more")
        await self._require_partitioned()
        existing = {p.name for p in await self.list_partitions()}
        report = EnsureReport()
        current = month_start(now)
        for month in (add_months(current, i) for i in range(ahead + 1)):
            name = partition_name(month)
            if name in existing:
                report.existing.append(name)
                continue
            try:
                async with self._ddl() as conn:
                    await _create_month(conn, month, sql.Identifier(PARENT))
            except errors.CheckViolation:
                # The default partition already holds ids of that month (ensure was not run in
                # time). They stay there, served by the same indexes and pruned row by row.
                report.skipped[name] = f"{DEFAULT_PARTITION} holds executions of that month"
            except errors.InvalidObjectDefinition as exc:
                report.skipped[name] = str(exc).splitlines()[0]
            else:
                report.created.append(name)
        return report

    # -- drop -----------------------------------------------------------------------------------

    async def drop(
        self,
        now: datetime,
        older_than: timedelta,
        *,
        force: bool = False,
        dry_run: bool = False,
        batch: int = DEFAULT_BATCH,
    ) -> list[DropOutcome]:
        """Drops the monthly partitions whose every execution was created before
        ``now - older_than`` and is terminal and finished before it; refuses (keeps) one that
        still holds live or recently finished executions unless ``force``."""
        if older_than <= timedelta(0):
            raise PartitioningError("the age must be more than zero")
        await self._require_partitioned()
        cutoff = now - older_than
        candidates = [
            p for p in await self.list_partitions() if p.end is not None and p.end <= cutoff
        ]
        outcomes = []
        for p in candidates:
            outcomes.append(
                await self._drop_one(p, cutoff, force=force, dry_run=dry_run, batch=batch)
            )
        return outcomes

    async def _drop_one(
        self, p: Partition, cutoff: datetime, *, force: bool, dry_run: bool, batch: int
    ) -> DropOutcome:
        assert p.start is not None and p.end is not None
        async with self._pool.connection() as conn:
            live, recent = await _counts(conn, p.name, cutoff)
        if (live or recent) and not force:
            return DropOutcome(p.name, False, live, recent, _refusal(live, recent, cutoff))
        if dry_run:
            return DropOutcome(p.name, False, live, recent, "would be dropped (dry run)")
        bounds = {"lower": uuid7_floor(p.start), "upper": uuid7_floor(p.end)}
        # First, outside any strong lock and batch by batch, the children of that month's ids:
        # only history past its retention (or, forced, what the operator chose to give up).
        for table in (*CHILD_TABLES, KEYS_TABLE):
            await self._delete_children(table, bounds, batch)
        # Then, for milliseconds under the parent's lock: the check again (a replay may have
        # revived a dead letter meanwhile), stragglers, detach and drop.
        async with self._ddl() as conn:
            await conn.execute(Q["partition_lock_parent"])
            live, recent = await _counts(conn, p.name, cutoff)
            if (live or recent) and not force:
                return DropOutcome(p.name, False, live, recent, _refusal(live, recent, cutoff))
            for table in (*CHILD_TABLES, KEYS_TABLE):
                while await _delete_batch(conn, table, bounds, batch) == batch:
                    pass
            await conn.execute(
                sql.SQL(Q["partition_detach_and_drop"]).format(partition=sql.Identifier(p.name))
            )
        return DropOutcome(p.name, True, live, recent, "dropped")

    async def _delete_children(self, table: str, bounds: dict[str, Any], batch: int) -> None:
        while True:
            async with self._pool.connection() as conn:
                if await _delete_batch(conn, table, bounds, batch) < batch:
                    return


# -- helpers --------------------------------------------------------------------------------------


def _partition(row: DictRow) -> Partition:
    bound = str(row["bound"])
    start = end = None
    if bound != "DEFAULT":
        match = _BOUND.fullmatch(bound)
        if match is None:  # pragma: no cover - only tickwheel creates partitions
            raise PartitioningError(f"partition {row['name']} has an unexpected bound: {bound}")
        start = uuid7_time(uuid.UUID(match.group(1)))
        end = uuid7_time(uuid.UUID(match.group(2)))
    return Partition(str(row["name"]), start, end, int(row["rows_estimate"]), int(row["bytes"]))


async def _references(conn: Conn) -> list[tuple[str, str]]:
    rows = await (await conn.execute(Q["partition_references"])).fetchall()
    return [(str(r["table_name"]), str(r["constraint_name"])) for r in rows]


async def _check_convertible(conn: Conn, references: Sequence[tuple[str, str]]) -> None:
    unknown = sorted({t for t, _ in references} - set(CHILD_TABLES))
    if unknown:
        raise PartitioningError(
            f"{', '.join(unknown)} references executions with a foreign key that partitioning"
            " does not know how to replace; nothing was changed"
        )
    rows = await (await conn.execute(Q["partition_unique_indexes"])).fetchall()
    extra = [str(r["name"]) for r in rows if r["name"] != "executions_idempotency_key"]
    if extra:
        raise PartitioningError(
            f"unique index {', '.join(extra)} on executions cannot be kept on a partitioned"
            " table; nothing was changed"
        )


async def _create_month(conn: Conn, month: datetime, parent: sql.Identifier) -> None:
    await conn.execute(
        sql.SQL(Q["partition_create_month"]).format(
            partition=sql.Identifier(partition_name(month)),
            parent=parent,
            lower=sql.Literal(str(uuid7_floor(month))),
            upper=sql.Literal(str(uuid7_floor(add_months(month, 1)))),
        )
    )


async def _counts(conn: Conn, partition: str, cutoff: datetime) -> tuple[int, int]:
    query = sql.SQL(Q["partition_counts"]).format(partition=sql.Identifier(partition))
    row = await (await conn.execute(query, {"cutoff": cutoff})).fetchone()
    assert row is not None
    return int(row["live"]), int(row["recent"])


async def _delete_batch(conn: Conn, table: str, bounds: dict[str, Any], limit: int) -> int:
    query = sql.SQL(Q["partition_delete_children"]).format(table=sql.Identifier(table))
    cursor = await conn.execute(query, {**bounds, "limit": limit})
    return cursor.rowcount


def _refusal(live: int, recent: int, cutoff: datetime) -> str:
    parts = []
    if live:
        parts.append(f"{live} not finished yet (SCHEDULED, READY, RUNNING or RETRY_WAIT)")
    if recent:
        parts.append(f"{recent} finished after {cutoff.isoformat(timespec='seconds')}")
    return "kept: " + " and ".join(parts) + " (--force drops them too)"
