"""The statement of a transactional submission (``Store.execution_insert_on``): an insert the
caller runs on their own connection, in their own transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tickwheel.store.records import InsertOutcome


class CallerInsert(Protocol):
    """An insert of executions to run on the caller's own connection, inside the caller's open
    transaction (``Store.execution_insert_on``): the rows exist exactly when that transaction
    commits, and the wake-ups (PostgreSQL's NOTIFY) are delivered only then. Each backend names
    the connections it takes and refuses any other with a TypeError."""

    def run(self, connection: Any) -> list[InsertOutcome]:
        """On a blocking connection (psycopg ``Connection``, ``sqlite3.Connection``)."""
        ...

    async def run_async(self, connection: Any) -> list[InsertOutcome]:
        """On an asyncio connection (psycopg ``AsyncConnection``, ``aiosqlite.Connection``)."""
        ...
