"""API keys (``ApiKeyStore``) on SQLite: mixed into ``SqliteStore`` (its connection and lock)."""

from __future__ import annotations

from datetime import datetime

from tickwheel.domain.models import ApiKey
from tickwheel.store.sqlite.codec import to_us
from tickwheel.store.sqlite.connection import Q, SqliteConnection
from tickwheel.store.sqlite.rows import api_key_row


class SqliteApiKeys(SqliteConnection):
    async def api_key_insert(self, key: ApiKey, key_hash: str) -> None:
        async with self._tx() as conn:
            await conn.execute(
                Q["api_key_insert"],
                {
                    "key_id": key.key_id,
                    "tenant": key.tenant,
                    "scope": str(key.scope),
                    "name": key.name,
                    "key_hash": key_hash,
                    "created_at": to_us(key.created_at),
                },
            )

    async def api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        row = await self._one("api_key_by_hash", {"key_hash": key_hash})
        return api_key_row(row) if row else None

    async def api_key_list(self, tenant: str | None = None) -> list[ApiKey]:
        return [api_key_row(r) for r in await self._all("api_key_list", {"tenant": tenant})]

    async def api_key_revoke(self, key_id: str, now: datetime) -> bool:
        async with self._tx() as conn:
            cursor = await conn.execute(Q["api_key_revoke"], {"key_id": key_id, "now": to_us(now)})
            return cursor.rowcount == 1

    async def api_key_count(self) -> int:
        row = await self._one("api_key_count", {})
        return int(row["n"]) if row else 0
