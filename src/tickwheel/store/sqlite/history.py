"""An execution's history (attempts, events, output kept by reference), the counts by status
and retention on SQLite: the rest of ``ExecutionStore``, mixed into ``SqliteStore`` (its
connection and lock)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from tickwheel.domain.models import Attempt, ExecutionEvent, ExecutionEventKind
from tickwheel.domain.states import ExecutionStatus
from tickwheel.store.sqlite.codec import from_us, jload, opt_us, to_us
from tickwheel.store.sqlite.connection import Q, SqliteConnection
from tickwheel.store.sqlite.rows import attempt_row


class SqliteHistory(SqliteConnection):
    async def execution_count_by_status(
        self, finished_since: datetime | None = None
    ) -> dict[ExecutionStatus, int]:
        rows = await self._all(
            "execution_count_by_status", {"finished_since": opt_us(finished_since)}
        )
        counts = dict.fromkeys(ExecutionStatus, 0)
        counts.update({ExecutionStatus(r["status"]): int(r["n"]) for r in rows})
        return counts

    async def execution_prune(self, finished_before: datetime, limit: int) -> int:
        async with self._tx() as conn:
            cursor = await conn.execute(
                Q["execution_prune"], {"finished_before": to_us(finished_before), "limit": limit}
            )
            return cursor.rowcount

    async def execution_output_get(self, tenant: str, execution_id: uuid.UUID) -> Any:
        row = await self._one(
            "execution_output_get", {"tenant": tenant, "execution_id": str(execution_id)}
        )
        return jload(row["output"]) if row else None

    async def attempt_list(self, tenant: str, execution_id: uuid.UUID) -> list[Attempt]:
        rows = await self._all(
            "attempt_list", {"tenant": tenant, "execution_id": str(execution_id)}
        )
        return [attempt_row(r) for r in rows]

    async def execution_event_list(
        self, tenant: str, execution_id: uuid.UUID
    ) -> list[ExecutionEvent]:
        rows = await self._all(
            "execution_event_list", {"tenant": tenant, "execution_id": str(execution_id)}
        )
        return [
            ExecutionEvent(
                execution_id=uuid.UUID(r["execution_id"]),
                kind=ExecutionEventKind(r["kind"]),
                at=from_us(r["at"]),
                detail=jload(r["detail"]),
            )
            for r in rows
        ]
