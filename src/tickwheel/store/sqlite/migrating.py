"""The schema's migrations on SQLite, mixed into ``SqliteStore`` (its connection and lock):
applied in one write transaction, statement by statement, since ``executescript`` would commit
on its own halfway."""

from __future__ import annotations

import sqlite3

from tickwheel.store.migrate import load_migrations, pending
from tickwheel.store.sqlfile import without_comment_lines
from tickwheel.store.sqlite.connection import SqliteConnection


class SqliteMigrations(SqliteConnection):
    async def _applied(self) -> dict[int, str]:
        await self._conn.execute(
            "CREATE TABLE IF NOT EXISTS tickwheel_migrations (version INTEGER PRIMARY KEY,"
            " name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at INTEGER NOT NULL)"
        )
        cursor = await self._conn.execute("SELECT version, checksum FROM tickwheel_migrations")
        return {int(r["version"]): str(r["checksum"]) for r in await cursor.fetchall()}

    async def migrations_pending(self) -> list[str]:
        async with self._lock:
            todo = pending(
                load_migrations("tickwheel.store.sqlite.migrations"), await self._applied()
            )
        return [m.label for m in todo]

    async def migrate(self) -> list[str]:
        applied: list[str] = []
        async with self._tx() as conn:
            all_migrations = load_migrations("tickwheel.store.sqlite.migrations")
            for m in pending(all_migrations, await self._applied()):
                # executescript would COMMIT on its own; run statement by statement instead.
                for statement in split_statements(m.sql):
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO tickwheel_migrations VALUES (?, ?, ?, strftime('%s','now'))",
                    (m.version, m.name, m.checksum),
                )
                applied.append(m.label)
        return applied


def split_statements(script: str) -> list[str]:
    """Our migrations keep semicolons out of literals, so dropping comment lines and splitting
    on ``;`` is exact for them, except inside a trigger's BEGIN ... END: pieces are joined until
    SQLite says the statement is complete."""
    code = without_comment_lines(script)
    statements: list[str] = []
    pending = ""
    for part in code.split(";"):
        pending += part + ";"
        if sqlite3.complete_statement(pending):
            if text := pending.strip().removesuffix(";").strip():
                statements.append(text)
            pending = ""
    if text := pending.strip().removesuffix(";").strip():
        statements.append(text)
    return statements
