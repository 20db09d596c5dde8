"""Running work on SQLite (issue 14): cancel requests, heartbeats that carry progress and
checkpoints, snoozes. Mixed into ``SqliteStore``; queries in ``sql/running.sql``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwheel.domain.models import Execution, ExecutionEventKind
from tickwheel.domain.states import AttemptStatus
from tickwheel.store.protocol import Topic
from tickwheel.store.running_protocol import Beat
from tickwheel.store.sqlfile import load_queries
from tickwheel.store.sqlite.codec import to_us
from tickwheel.store.sqlite.connection import SqliteConnection
from tickwheel.store.sqlite.rows import execution_row

Q = load_queries("tickwheel.store.sqlite.sql")


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


class SqliteRunning(SqliteConnection):
    _signal: Callable[[Topic], None]

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
        at = now or datetime.now(UTC)
        params = {
            "execution_id": str(execution_id),
            "fencing_token": fencing_token,
            "lease_expires_at": to_us(at + lease),
            "now": to_us(at),
            "progress": _json(progress),
            "checkpoint": _json(checkpoint),
        }
        async with self._tx() as conn:
            cursor = await conn.execute(Q["execution_beat"], params)
            row = await cursor.fetchone()
        return None if row is None else Beat(row["cancel_requested_at"] is not None)

    async def execution_cancel_request(
        self, tenant: str, execution_id: uuid.UUID, now: datetime
    ) -> Execution | None:
        params = {"tenant": tenant, "execution_id": str(execution_id), "now": to_us(now)}
        async with self._tx() as conn:
            cursor = await conn.execute(Q["execution_get"], params)
            prior = await cursor.fetchone()
            cursor = await conn.execute(Q["execution_cancel_request"], params)
            row = await cursor.fetchone()
            if row is None or prior is None:
                return None
            if prior["cancel_requested_at"] is None:
                self._signal(Topic.CANCEL)
                detail = {"fromStatus": "RUNNING", "attemptCount": row["attempt_count"]}
                await conn.execute(
                    Q["execution_event_insert"],
                    {
                        "execution_id": params["execution_id"],
                        "kind": str(ExecutionEventKind.CANCEL_REQUESTED),
                        "at": params["now"],
                        "detail": json.dumps(detail),
                    },
                )
            return execution_row(row)

    async def execution_snooze(
        self,
        execution_id: uuid.UUID,
        fencing_token: int,
        until: datetime,
        detail: dict[str, Any],
        now: datetime | None = None,
    ) -> bool:
        params = {
            "execution_id": str(execution_id),
            "fencing_token": fencing_token,
            "until": to_us(until),
            "now": to_us(now or datetime.now(UTC)),
        }
        async with self._tx() as conn:
            cursor = await conn.execute(Q["execution_snooze"], params)
            row = await cursor.fetchone()
            if row is None:
                return False
            await conn.execute(
                Q["attempt_finish"],
                {
                    **params,
                    "attempt_number": row["attempt_count"],
                    "attempt_status": str(AttemptStatus.ABANDONED),
                    "error": json.dumps(detail),
                },
            )
        self._signal(Topic.DUE)
        return True
