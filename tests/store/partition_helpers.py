"""What the partitioning tests share: a brand-new database per test (the conversion is not
reversible, and the session's shared database must stay in the default, plain layout), and
executions created at a chosen instant, in any month."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from tests.factories import new_execution
from tickwheel.cli.main import app
from tickwheel.domain.models import Execution
from tickwheel.domain.sharding import shard_id
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.domain.submission import NewExecution
from tickwheel.store.postgres.partitions import (
    ExecutionPartitions,
    Partition,
    partitions_for,
    uuid7_floor,
)
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.protocol import AttemptResult, Store

NOW = datetime(2026, 11, 15, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)
LEASE = timedelta(seconds=30)


@dataclass
class Fresh:
    store: PostgresStore
    url: str
    parts: ExecutionPartitions

    def scalar(self, query: str, *params: object) -> object:
        with psycopg.connect(self.url) as conn:
            row = conn.execute(query, params).fetchone()
        assert row is not None
        return row[0]

    def rows_of(self, table: str, ids: list[uuid.UUID]) -> int:
        """How many rows of ``table`` hang off these executions."""
        query = sql.SQL("SELECT count(*) FROM {} WHERE execution_id = ANY(%s)")
        with psycopg.connect(self.url) as conn:
            row = conn.execute(query.format(sql.Identifier(table)), (ids,)).fetchone()
        assert row is not None
        return int(row[0])


@contextmanager
def database(pg_url: str, template: str | None = None) -> Iterator[str]:
    """A brand-new database on the test server, dropped afterwards: empty, or a copy of
    ``template``."""
    name = f"tickwheel_parts_{uuid.uuid4().hex[:12]}"
    copy = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copy}')
    try:
        yield pg_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def fresh(pg_url: str, pg_migrated_template: str) -> AsyncIterator[Fresh]:
    """A database of its own, a copy of the session's migrated template (tests/conftest.py)."""
    with database(pg_url, pg_migrated_template) as url:
        store = await PostgresStore.open(url, max_size=4)
        try:
            await store.migrate()  # nothing left to apply
            yield Fresh(store, url, partitions_for(store))
        finally:
            await store.close()


@pytest.fixture
def fresh_url(pg_url: str, pg_migrated_template: str) -> Iterator[str]:
    """For the CLI, which runs its own event loop: a copy of the migrated template, on which
    ``tickwheel db upgrade`` finds nothing left to do."""
    with database(pg_url, pg_migrated_template) as url:
        result = CliRunner().invoke(app, ["db", "upgrade", "--database-url", url])
        assert result.exit_code == 0, result.output
        yield url


def new_at(*, now: datetime, **kwargs: Any) -> NewExecution:
    """``new_execution`` with an id of exactly ``now``'s millisecond. The process's UUIDv7
    generator never goes back in time (its ids only grow), so ids of past months are made here."""
    item = new_execution(now=now, **kwargs)
    rand = int.from_bytes(os.urandom(10), "big") >> 6
    value = uuid7_floor(now).int | 0x7 << 76 | (rand >> 62) << 64 | 0b10 << 62
    execution_id = uuid.UUID(int=value | rand & ((1 << 62) - 1))
    return replace(item, execution_id=execution_id, shard_id=shard_id(execution_id))


async def finished(
    store: Store, created: datetime, finished: datetime, key: str | None = None
) -> Execution:
    """An execution created at ``created`` and run to SUCCEEDED at ``finished``, with an attempt
    and an output kept by reference (a row in execution_outputs)."""
    item = new_at(now=created, key=key)
    await store.execution_insert_many([item])
    [claimed] = await store.execution_claim_ready("w1", 1, LEASE, finished)
    assert claimed.execution_id == item.execution_id and claimed.fencing_token is not None
    result = AttemptResult(
        claimed.execution_id,
        claimed.fencing_token,
        AttemptStatus.SUCCEEDED,
        ExecutionStatus.SUCCEEDED,
        output={"greeting": "hi"},
        output_reference=f"tickwheel://executions/{claimed.execution_id}/output",
        output_size=17,
    )
    assert await store.attempt_finish(result, finished)
    got = await store.execution_get("acme", claimed.execution_id)
    assert got is not None
    return got


async def scheduled(store: Store, created: datetime, key: str, in_days: float) -> Execution:
    item = new_at(now=created, key=key, execute_in=in_days * 86_400)
    [outcome] = await store.execution_insert_many([item])
    assert outcome.created
    return outcome.execution


def names(partitions: list[Partition]) -> list[str]:
    return [p.name for p in partitions]
