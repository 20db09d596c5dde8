"""The Job Definition registry (``DefinitionStore``) on PostgreSQL: mixed into ``PostgresStore``
(its pool)."""

from __future__ import annotations

from psycopg.types.json import Jsonb

from tickwheel.domain.definitions import definition_to_document
from tickwheel.store.postgres.queries import PostgresQueries
from tickwheel.store.postgres.rows import definition_from_row, require_aware
from tickwheel.store.records import StoredDefinition


class PostgresDefinitions(PostgresQueries):
    async def definition_insert(self, stored: StoredDefinition) -> bool:
        d = stored.definition
        params = {
            "owner": stored.owner,
            "name": d.name,
            "version": d.version,
            "document": Jsonb(definition_to_document(d)),
            "content_hash": stored.content_hash,
            "created_at": require_aware(stored.created_at),
        }
        return await self._rowcount("definition_insert", params) == 1

    async def definition_get(
        self, tenant: str, name: str, version: int | None = None
    ) -> StoredDefinition | None:
        params = {"tenant": tenant, "name": name, "version": version}
        row = await self._one("definition_get", params)
        return definition_from_row(row) if row else None

    async def definition_list(self, tenant: str) -> list[StoredDefinition]:
        rows = await self._all("definition_list_latest", {"tenant": tenant})
        return [definition_from_row(r) for r in rows]

    async def definition_versions(self, tenant: str, name: str) -> list[StoredDefinition]:
        rows = await self._all("definition_versions", {"tenant": tenant, "name": name})
        return [definition_from_row(r) for r in rows]
