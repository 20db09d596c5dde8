"""The schema's migrations on PostgreSQL, mixed into ``PostgresStore`` (its pool): all pending
ones in one transaction under an advisory lock, so that processes starting together apply each
once, and a failing one leaves the schema as it was."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from psycopg.errors import UndefinedTable
from psycopg_pool import AsyncConnectionPool

from tickwheel.store.migrate import Migration, load_migrations, pending
from tickwheel.store.postgres.pool import Conn

MIGRATIONS = "tickwheel.store.postgres.migrations"
# pg_advisory_xact_lock key held while migrations are read or applied ("tickwhe" in ASCII), so two
# processes starting at once apply each migration once instead of both trying.
MIGRATION_LOCK = 0x7469636B776865


class PostgresMigrations:
    _pool: AsyncConnectionPool[Conn]
    _tx: Callable[[], AbstractAsyncContextManager[Conn]]

    async def _applied(self, conn: Conn) -> dict[int, str]:
        """Inside a transaction: takes the migration lock, then reads what is applied."""
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS tickwheel_migrations (version integer PRIMARY KEY,"
            " name text NOT NULL, checksum text NOT NULL, applied_at timestamptz NOT NULL)"
        )
        cursor = await conn.execute("SELECT version, checksum FROM tickwheel_migrations")
        return {int(r["version"]): str(r["checksum"]) for r in await cursor.fetchall()}

    async def migrations_pending(self) -> list[str]:
        known = load_migrations(MIGRATIONS)
        # Checked at every start (and by the health route): one read, without the lock, the
        # table's creation and a transaction's four more round trips. A migration commits
        # whole, so with nothing pending here there is nothing one in progress could add.
        try:
            async with self._pool.connection() as conn:
                cursor = await conn.execute("SELECT version, checksum FROM tickwheel_migrations")
                applied = {int(r["version"]): str(r["checksum"]) for r in await cursor.fetchall()}
            if not pending(known, applied):
                return []
        except UndefinedTable:
            pass  # a new database: the locked read creates the table
        # Under the lock, which waits for a migration in progress to commit (as always).
        async with self._tx() as conn:
            todo = pending(known, await self._applied(conn))
        return [m.label for m in todo]

    async def migrate(self) -> list[str]:
        # One transaction for all pending migrations: DDL is transactional in PostgreSQL, so a
        # failing migration leaves the schema as it was, and the advisory lock makes a second
        # process wait here and then find nothing left to do.
        applied: list[Migration] = []
        async with self._tx() as conn:
            for m in pending(load_migrations(MIGRATIONS), await self._applied(conn)):
                # No parameters: psycopg sends the script as one simple query, many statements.
                await conn.execute(m.sql)
                await conn.execute(
                    "INSERT INTO tickwheel_migrations VALUES (%s, %s, %s, now())",
                    (m.version, m.name, m.checksum),
                )
                applied.append(m)
        return [m.label for m in applied]
