"""API keys (``ApiKeyStore``) on PostgreSQL: mixed into ``PostgresStore`` (its query helpers)."""

from __future__ import annotations

from datetime import datetime

from tickwheel.domain.models import ApiKey
from tickwheel.store.postgres.queries import PostgresQueries
from tickwheel.store.postgres.rows import (
    api_key_from_row,
    require_aware,
)


class PostgresApiKeys(PostgresQueries):
    async def api_key_insert(self, key: ApiKey, key_hash: str) -> None:
        params = {
            "key_id": key.key_id,
            "tenant": key.tenant,
            "scope": str(key.scope),
            "name": key.name,
            "key_hash": key_hash,
            "created_at": require_aware(key.created_at),
        }
        await self._rowcount("api_key_insert", params)

    async def api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        row = await self._one("api_key_by_hash", {"key_hash": key_hash})
        return api_key_from_row(row) if row else None

    async def api_key_list(self, tenant: str | None = None) -> list[ApiKey]:
        return [api_key_from_row(r) for r in await self._all("api_key_list", {"tenant": tenant})]

    async def api_key_revoke(self, key_id: str, now: datetime) -> bool:
        params = {"key_id": key_id, "now": require_aware(now)}
        return await self._rowcount("api_key_revoke", params) == 1

    async def api_key_count(self) -> int:
        row = await self._one("api_key_count", {})
        return int(row["n"]) if row else 0
