"""The one connection a SQLite store has, and the lock that lends it to one caller at a time.

Every SQLite store class (the main store's mixins and the cron, workflow, stats and view tables
that share its connection) inherits these helpers, so that a transaction is opened, committed
and rolled back in exactly one place. Write transactions are ``BEGIN IMMEDIATE``: they take the
file's write lock up front, so two processes sharing the file queue on it (``busy_timeout``)
instead of failing halfway through, and a select-then-update inside one is a single step."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import aiosqlite

from tickwheel.domain.errors import Unavailable
from tickwheel.store.sqlfile import load_queries

Q = load_queries("tickwheel.store.sqlite.sql")


class SqliteConnection:
    def __init__(self, conn: aiosqlite.Connection, lock: asyncio.Lock) -> None:
        self._conn = conn
        # Shared by every store object built on this connection: one connection carries one
        # transaction at a time, so an insert by the in-process client can never land inside a
        # cron or workflow transaction.
        self._lock = lock

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[aiosqlite.Connection]:
        """One write transaction: committed if the block ends, rolled back if it raises
        (cancellation included, hence ``BaseException``)."""
        async with self._lock:
            with _busy_is_unavailable():
                await self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                await self._conn.execute("ROLLBACK")
                raise
            with _busy_is_unavailable():
                await self._conn.execute("COMMIT")

    async def _all(self, query: str, params: dict[str, Any]) -> list[sqlite3.Row]:
        """All rows of one named query, outside any transaction: in autocommit mode one statement
        is its own transaction."""
        async with self._lock:
            with _busy_is_unavailable():
                cursor = await self._conn.execute(Q[query], params)
                return list(await cursor.fetchall())

    async def _one(self, query: str, params: dict[str, Any]) -> sqlite3.Row | None:
        rows = await self._all(query, params)
        return rows[0] if rows else None


@contextmanager
def _busy_is_unavailable() -> Iterator[None]:
    """Another process held the file's lock for longer than ``busy_timeout``: the database is
    busy, not the request wrong, so it becomes ``Unavailable`` (503 with ``Retry-After``)."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise Unavailable(
                "the database is busy (locked by another process); retry shortly"
            ) from exc
        raise
