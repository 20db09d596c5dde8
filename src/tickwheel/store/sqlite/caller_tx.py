"""Transactional submission on SQLite: ``execution_insert`` run on the caller's own connection to
the same file (``sqlite3`` or ``aiosqlite``), inside the caller's transaction.

The store's wake-ups are events of this process, fired after its own commits; it cannot see the
caller's commit, so it fires none: a scheduler finds the executions at its next look at the
table (its poll interval), never before they are committed."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, cast

import aiosqlite

from tickwheel.domain.submission import NewExecution
from tickwheel.store.protocol import InsertOutcome
from tickwheel.store.sqlfile import load_queries
from tickwheel.store.sqlite.rows import execution_row, insert_params

Q = load_queries("tickwheel.store.sqlite.sql")


class SqliteCallerInsert:
    def __init__(self, items: Sequence[NewExecution]) -> None:
        self.items = list(items)

    def run(self, connection: Any) -> list[InsertOutcome]:
        if isinstance(connection, aiosqlite.Connection):
            raise TypeError(
                "an aiosqlite Connection needs the AsyncClient (tickwheel.connect_async)"
            )
        if not isinstance(connection, sqlite3.Connection):
            raise TypeError(_wrong(connection))
        _require_transaction(connection)
        outcomes: list[InsertOutcome] = []
        for item in self.items:
            cursor = connection.execute(Q["execution_insert"], insert_params(item))
            row = _as_row(cursor.description, cursor.fetchone())
            if row is None:
                cursor = connection.execute(Q["execution_get_by_key"], _key(item))
                row = _as_row(cursor.description, cursor.fetchone())
                outcomes.append(_existing(row))
            else:
                outcomes.append(InsertOutcome(execution_row(row), created=True))
        return outcomes

    async def run_async(self, connection: Any) -> list[InsertOutcome]:
        if isinstance(connection, sqlite3.Connection):
            return self.run(connection)
        if not isinstance(connection, aiosqlite.Connection):
            raise TypeError(_wrong(connection))
        _require_transaction(connection)
        outcomes: list[InsertOutcome] = []
        for item in self.items:
            cursor = await connection.execute(Q["execution_insert"], insert_params(item))
            row = _as_row(cursor.description, await cursor.fetchone())
            if row is None:
                cursor = await connection.execute(Q["execution_get_by_key"], _key(item))
                row = _as_row(cursor.description, await cursor.fetchone())
                outcomes.append(_existing(row))
            else:
                outcomes.append(InsertOutcome(execution_row(row), created=True))
        return outcomes


def _require_transaction(connection: sqlite3.Connection | aiosqlite.Connection) -> None:
    """A connection in autocommit mode outside a transaction would commit the insert on its own:
    refused. The default mode (``isolation_level=""``) opens a transaction before the insert."""
    if connection.in_transaction:
        return
    if connection.isolation_level is None or getattr(connection, "autocommit", False) is True:
        raise ValueError(
            "the connection is in autocommit mode with no transaction open: run BEGIN first "
            "(or use a connection that opens transactions itself)"
        )


def _key(item: NewExecution) -> dict[str, Any]:
    return {"tenant": item.tenant, "idempotency_key": item.idempotency_key}


def _as_row(description: Any, values: Any) -> sqlite3.Row | None:
    """By column name whatever the caller's ``row_factory`` (tuples, Row, something else):
    the connection's settings are the caller's and stay as they are."""
    if values is None:
        return None
    names = [column[0] for column in description]
    return cast(sqlite3.Row, dict(zip(names, tuple(values), strict=True)))


def _existing(row: sqlite3.Row | None) -> InsertOutcome:
    if row is None:  # pragma: no cover - the constraint guarantees a row
        raise RuntimeError("insert conflicted but no execution holds the key")
    return InsertOutcome(execution_row(row), created=False)


def _wrong(connection: object) -> str:
    kind = f"{type(connection).__module__}.{type(connection).__qualname__}"
    return (
        f"cannot submit on a {kind} to a SQLite store: pass a sqlite3 or aiosqlite connection "
        "to the same database file (or a SQLAlchemy Session or Connection over it)"
    )


class SqliteCallerTx:
    """The store's side (a mixin): nothing of the store is needed but the statement."""

    def execution_insert_on(self, items: Sequence[NewExecution]) -> SqliteCallerInsert:
        return SqliteCallerInsert(items)
