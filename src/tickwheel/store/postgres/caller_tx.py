"""Transactional submission on PostgreSQL: ``execution_insert`` run on the caller's psycopg
connection instead of the pool, so the executions are part of the caller's transaction.

The statement is the pool's own, NOTIFYs included: PostgreSQL delivers a notification sent inside
a transaction at its commit and drops it at a rollback, so the schedulers hear of the executions
exactly when they exist. The in-process wake-up of the pool's path is left out (this store cannot
see the commit); a scheduler in this process hears the NOTIFY like any other."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import pq
from psycopg.rows import dict_row

from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import NewExecution
from tickwheel.store.due import hint_pairs
from tickwheel.store.postgres.notify import Signals
from tickwheel.store.postgres.rows import (
    execution_from_new,
    execution_from_row,
    in_lock_order,
    insert_items,
    insert_outcomes,
    insert_statement,
    key_pairs,
)
from tickwheel.store.protocol import InsertOutcome
from tickwheel.store.sqlfile import load_queries

Q = load_queries("tickwheel.store.postgres.sql")


class PostgresCallerInsert:
    def __init__(self, items: Sequence[NewExecution], signals: Signals) -> None:
        self.items = list(items)
        statuses = {i.status for i in items}
        due = hint_pairs(items) if ExecutionStatus.SCHEDULED in statuses else []
        self.params: dict[str, Any] = {
            **insert_items(in_lock_order(items)),
            "notify": signals.insert_notifications(statuses, due),
        }

    def run(self, connection: Any) -> list[InsertOutcome]:
        if isinstance(connection, psycopg.AsyncConnection):
            raise TypeError(
                "a psycopg AsyncConnection needs the AsyncClient (tickwheel.connect_async)"
            )
        if not isinstance(connection, psycopg.Connection):
            raise TypeError(_wrong(connection))
        _require_transaction(connection)
        if not self.items:
            return []
        with connection.cursor(row_factory=dict_row) as cursor:
            cursor.execute(insert_statement(self.params), self.params)
            created = {r["execution_id"] for r in cursor.fetchall()}
            missing = self._missing(created)
            existing = []
            if missing:
                cursor.execute(Q["execution_get_by_key"], missing)
                existing = cursor.fetchall()
        return self._outcomes(created, existing)

    async def run_async(self, connection: Any) -> list[InsertOutcome]:
        if isinstance(connection, psycopg.Connection):
            return self.run(connection)
        if not isinstance(connection, psycopg.AsyncConnection):
            raise TypeError(_wrong(connection))
        _require_transaction(connection)
        if not self.items:
            return []
        async with connection.cursor(row_factory=dict_row) as cursor:
            await cursor.execute(insert_statement(self.params), self.params)
            created = {r["execution_id"] for r in await cursor.fetchall()}
            missing = self._missing(created)
            existing = []
            if missing:
                await cursor.execute(Q["execution_get_by_key"], missing)
                existing = await cursor.fetchall()
        return self._outcomes(created, existing)

    def _missing(self, created: set[Any]) -> dict[str, Any] | None:
        """The keys whose insert skipped (an earlier execution holds them): read in a second
        statement of the same transaction, which sees this transaction's rows and, under READ
        COMMITTED, those of competing submissions committed meanwhile."""
        missing = [i for i in self.items if i.execution_id not in created]
        if not missing:
            return None
        return {"pairs": key_pairs(missing)}

    def _outcomes(self, created: set[Any], existing: list[Any]) -> list[InsertOutcome]:
        inserted = [execution_from_new(i) for i in self.items if i.execution_id in created]
        return insert_outcomes(self.items, inserted, [execution_from_row(r) for r in existing])


def _require_transaction(
    connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any],
) -> None:
    """An autocommit connection outside ``connection.transaction()`` would commit the insert on
    its own: refused, since the point is the caller's transaction."""
    idle = connection.info.transaction_status == pq.TransactionStatus.IDLE
    if connection.autocommit and idle:
        raise ValueError(
            "the connection is in autocommit mode with no transaction open: submit inside "
            "`with conn.transaction():` (or use a connection without autocommit)"
        )


def _wrong(connection: object) -> str:
    kind = f"{type(connection).__module__}.{type(connection).__qualname__}"
    return (
        f"cannot submit on a {kind} to a PostgreSQL store: pass a psycopg 3 Connection or "
        "AsyncConnection (or a SQLAlchemy Session or Connection over psycopg)"
    )


class PostgresCallerTx:
    """The store's side: the mixin that builds the statement with the store's NOTIFY payloads."""

    _signals: Signals

    def execution_insert_on(self, items: Sequence[NewExecution]) -> PostgresCallerInsert:
        return PostgresCallerInsert(items, self._signals)
