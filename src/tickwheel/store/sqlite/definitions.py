"""The Job Definition registry (``DefinitionStore``) on SQLite: mixed into ``SqliteStore`` (its
connection and lock)."""

from __future__ import annotations

import json

from tickwheel.domain.definitions import definition_to_document
from tickwheel.store.records import StoredDefinition
from tickwheel.store.sqlite.codec import to_us
from tickwheel.store.sqlite.connection import Q, SqliteConnection
from tickwheel.store.sqlite.rows import definition_row


class SqliteDefinitions(SqliteConnection):
    async def definition_insert(self, stored: StoredDefinition) -> bool:
        d = stored.definition
        async with self._tx() as conn:
            cursor = await conn.execute(
                Q["definition_insert"],
                {
                    "owner": stored.owner,
                    "name": d.name,
                    "version": d.version,
                    "document": json.dumps(definition_to_document(d), sort_keys=True),
                    "content_hash": stored.content_hash,
                    "created_at": to_us(stored.created_at),
                },
            )
            return cursor.rowcount == 1

    async def definition_get(
        self, tenant: str, name: str, version: int | None = None
    ) -> StoredDefinition | None:
        params = {"tenant": tenant, "name": name, "version": version}
        row = await self._one("definition_get", params)
        return definition_row(row) if row else None

    async def definition_list(self, tenant: str) -> list[StoredDefinition]:
        rows = await self._all("definition_list_latest", {"tenant": tenant})
        return [definition_row(r) for r in rows]

    async def definition_versions(self, tenant: str, name: str) -> list[StoredDefinition]:
        rows = await self._all("definition_versions", {"tenant": tenant, "name": name})
        return [definition_row(r) for r in rows]
