"""An execution's history (attempts, events, output kept by reference), the counts by status
and retention on PostgreSQL: the rest of ``ExecutionStore``, mixed into ``PostgresStore`` (its
query helpers)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from tickwheel.domain.models import Attempt, ExecutionEvent
from tickwheel.domain.states import ExecutionStatus
from tickwheel.store.postgres.queries import PostgresQueries
from tickwheel.store.postgres.rows import (
    attempt_from_row,
    event_from_row,
    opt_aware,
    require_aware,
)


class PostgresHistory(PostgresQueries):
    async def execution_count_by_status(
        self, finished_since: datetime | None = None
    ) -> dict[ExecutionStatus, int]:
        rows = await self._all(
            "execution_count_by_status", {"finished_since": opt_aware(finished_since)}
        )
        counts = dict.fromkeys(ExecutionStatus, 0)
        counts.update({ExecutionStatus(r["status"]): int(r["n"]) for r in rows})
        return counts

    async def execution_prune(self, finished_before: datetime, limit: int) -> int:
        params = {"finished_before": require_aware(finished_before), "limit": limit}
        return await self._rowcount("execution_prune", params)

    async def execution_output_get(self, tenant: str, execution_id: uuid.UUID) -> Any:
        row = await self._one(
            "execution_output_get", {"tenant": tenant, "execution_id": execution_id}
        )
        return row["output"] if row else None

    async def attempt_list(self, tenant: str, execution_id: uuid.UUID) -> list[Attempt]:
        rows = await self._all("attempt_list", {"tenant": tenant, "execution_id": execution_id})
        return [attempt_from_row(r) for r in rows]

    async def execution_event_list(
        self, tenant: str, execution_id: uuid.UUID
    ) -> list[ExecutionEvent]:
        rows = await self._all(
            "execution_event_list", {"tenant": tenant, "execution_id": execution_id}
        )
        return [event_from_row(r) for r in rows]
