"""Running work on PostgreSQL (issue 14): cancel requests, heartbeats that carry progress and
checkpoints, snoozes. Mixed into ``PostgresStore``; queries in ``sql/running.sql``."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from tickwheel.domain.models import Execution, ExecutionEventKind
from tickwheel.domain.states import AttemptStatus
from tickwheel.store.postgres.rows import execution_from_row, opt_aware, require_aware
from tickwheel.store.protocol import Topic
from tickwheel.store.running_protocol import Beat
from tickwheel.store.sqlfile import load_queries

Q = load_queries("tickwheel.store.postgres.sql")
Conn = AsyncConnection[DictRow]


def _jsonb(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


class PostgresRunning:
    _pool: AsyncConnectionPool[Conn]
    _signalling_tx: Callable[[], AbstractAsyncContextManager[tuple[Conn, set[Topic]]]]

    async def execution_beat(
        self,
        execution_id: uuid.UUID,
        fencing_token: int,
        lease: timedelta,
        now: datetime | None = None,
        *,
        progress: dict[str, Any] | None = None,
        checkpoint: Any = None,
    ) -> Beat | None:
        params = {
            "execution_id": execution_id,
            "fencing_token": fencing_token,
            "lease": lease,
            "now": opt_aware(now),
            "progress": _jsonb(progress),
            "checkpoint": _jsonb(checkpoint),
        }
        async with self._pool.connection() as conn:
            cursor = await conn.execute(Q["execution_beat"], params)
            row = await cursor.fetchone()
        return None if row is None else Beat(row["cancel_requested_at"] is not None)

    async def execution_cancel_request(
        self, tenant: str, execution_id: uuid.UUID, now: datetime
    ) -> Execution | None:
        params = {"tenant": tenant, "execution_id": execution_id, "now": require_aware(now)}
        async with self._signalling_tx() as (conn, topics):
            cursor = await conn.execute(Q["execution_cancel_request"], params)
            row = await cursor.fetchone()
            if row is None:
                return None
            if row["prior_requested_at"] is None:
                topics.add(Topic.CANCEL)
                detail = {"fromStatus": "RUNNING", "attemptCount": row["attempt_count"]}
                await conn.execute(
                    Q["execution_event_insert"],
                    {
                        "execution_id": execution_id,
                        "kind": str(ExecutionEventKind.CANCEL_REQUESTED),
                        "at": now,
                        "detail": Jsonb(detail),
                    },
                )
            return execution_from_row(row)

    async def execution_snooze(
        self,
        execution_id: uuid.UUID,
        fencing_token: int,
        until: datetime,
        detail: dict[str, Any],
        now: datetime | None = None,
    ) -> bool:
        params: dict[str, Any] = {
            "execution_id": execution_id,
            "fencing_token": fencing_token,
            "until": require_aware(until),
            "now": opt_aware(now),
        }
        async with self._signalling_tx() as (conn, topics):
            cursor = await conn.execute(Q["execution_snooze"], params)
            row = await cursor.fetchone()
            if row is None:
                return False
            params["attempt_number"] = row["attempt_count"]
            params["attempt_status"] = str(AttemptStatus.ABANDONED)
            params["error"] = Jsonb(detail)
            await conn.execute(Q["attempt_finish"], params)
            topics.add(Topic.DUE)
        return True
