"""Pauses and circuit breakers on SQLite (issue 14): mixed into ``SqliteStore``; queries in
``sql/flow.sql``. The breaker's rule is ``domain.breaker``; this file runs it inside one write
transaction (``BEGIN IMMEDIATE`` serialises them), with the transition's history row and pause."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import aiosqlite

from tickwheel.domain.breaker import (
    Breaker,
    BreakerConfig,
    BreakerState,
    Transition,
    after_attempt,
    start_probe,
)
from tickwheel.domain.models import Execution
from tickwheel.store.flow_protocol import (
    BreakerRecord,
    BreakerTransitionRecord,
    DuePasses,
    PauseKind,
    PauseRecord,
)
from tickwheel.store.protocol import Topic
from tickwheel.store.sqlfile import load_queries
from tickwheel.store.sqlite.codec import from_us, opt_us, to_us
from tickwheel.store.sqlite.connection import SqliteConnection
from tickwheel.store.sqlite.rows import execution_row

Q = load_queries("tickwheel.store.sqlite.sql")


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _opt_uuid(text: str | None) -> uuid.UUID | None:
    return None if text is None else uuid.UUID(text)


def _pause(row: sqlite3.Row) -> PauseRecord:
    return PauseRecord(
        row["tenant"],
        row["definition_uri"],
        PauseKind(row["kind"]),
        row["reason"],
        from_us(row["paused_at"]),
        _opt_uuid(row["probe_execution_id"]),
    )


def _breaker(row: sqlite3.Row) -> Breaker:
    until = row["cool_down_until"]
    return Breaker(
        BreakerState(row["state"]),
        int(row["consecutive_failures"]),
        row["recent"],
        None if until is None else from_us(until),
        _opt_uuid(row["probe_execution_id"]),
    )


class SqliteFlow(SqliteConnection):
    _signal: Callable[[Topic], None]

    async def pause_set(
        self, tenant: str, definition_uri: str, reason: str, now: datetime
    ) -> PauseRecord:
        key = {"tenant": tenant, "definition_uri": definition_uri}
        async with self._tx() as conn:
            await conn.execute(Q["pause_set"], {**key, "reason": reason, "now": to_us(now)})
            cursor = await conn.execute(Q["pause_get"], {**key, "kind": str(PauseKind.MANUAL)})
            row = await cursor.fetchone()
        assert row is not None  # inserted or already there, in this transaction
        return _pause(row)

    async def pause_clear(self, tenant: str, definition_uri: str) -> bool:
        async with self._tx() as conn:
            params = {"tenant": tenant, "definition_uri": definition_uri}
            cursor = await conn.execute(Q["pause_clear"], params)
        if cursor.rowcount:
            self._signal(Topic.READY)  # what the pause held back is claimable now
        return bool(cursor.rowcount)

    async def pause_list(self, tenant: str) -> list[PauseRecord]:
        return [_pause(r) for r in await self._all("pause_list", {"tenant": tenant})]

    async def flow_controls_present(self) -> bool:
        [row] = await self._all("flow_controls_present", {})
        return bool(row["present"])

    async def circuit_breaker_record(
        self,
        tenant: str,
        definition_uri: str,
        config: BreakerConfig,
        execution_id: uuid.UUID,
        failed: bool,
        now: datetime,
    ) -> Transition | None:
        key = {"tenant": tenant, "definition_uri": definition_uri}
        wake = False
        async with self._tx() as conn:
            cursor = await conn.execute(Q["circuit_breaker_lock"], {**key, "now": to_us(now)})
            row = await cursor.fetchone()
            assert row is not None
            before = _breaker(row)
            after, transition = after_attempt(config, before, execution_id, failed, now)
            if after != before:
                params = {**key, **_fields(after), "now": to_us(now)}
                await conn.execute(Q["circuit_breaker_put"], params)
            if transition is not None:
                wake = await _transitioned(conn, key, transition, after, to_us(now))
        if wake:
            self._signal(Topic.READY)
        return transition

    async def circuit_breaker_probe(self, now: datetime | None = None) -> list[str]:
        at = to_us(now or datetime.now(UTC))
        moved: list[str] = []
        async with self._tx() as conn:
            cursor = await conn.execute(Q["circuit_breaker_probe_due"], {"now": at})
            for row in await cursor.fetchall():
                key = {"tenant": row["tenant"], "definition_uri": row["definition_uri"]}
                picked = await (await conn.execute(Q["circuit_breaker_probe_pick"], key)).fetchone()
                if picked is None:
                    continue  # nothing to probe with yet: stays as it is until work arrives
                after, transition = start_probe(_breaker(row), uuid.UUID(picked["execution_id"]))
                await conn.execute(Q["circuit_breaker_put"], {**key, **_fields(after), "now": at})
                await _transitioned(conn, key, transition, after, at)
                moved.append(row["definition_uri"])
        if moved:
            self._signal(Topic.READY)
        return moved

    async def flow_passes_due(self, now: datetime | None = None) -> DuePasses:
        row = await self._one("flow_passes_due", {"now": to_us(now or datetime.now(UTC))})
        return DuePasses(bool(row and row["breakers"]), bool(row and row["expiry"]))

    async def circuit_breaker_list(self, tenant: str) -> list[BreakerRecord]:
        rows = await self._all("circuit_breaker_list", {"tenant": tenant})
        return [
            BreakerRecord(r["tenant"], r["definition_uri"], _breaker(r), from_us(r["updated_at"]))
            for r in rows
        ]

    async def circuit_breaker_transitions(
        self, tenant: str, definition_uri: str, limit: int
    ) -> list[BreakerTransitionRecord]:
        params = {"tenant": tenant, "definition_uri": definition_uri, "limit": limit}
        return [
            BreakerTransitionRecord(
                r["tenant"],
                r["definition_uri"],
                BreakerState(r["from_state"]),
                BreakerState(r["to_state"]),
                r["reason"],
                from_us(r["at"]),
            )
            for r in await self._all("circuit_breaker_transitions", params)
        ]

    async def circuit_breaker_counts(self) -> Sequence[tuple[BreakerState, int]]:
        rows = await self._all("circuit_breaker_counts", {})
        return [(BreakerState(r["state"]), int(r["n"])) for r in rows]

    async def execution_expire_due(
        self, now: datetime | None = None, limit: int = 500
    ) -> list[Execution]:
        at = to_us(now or datetime.now(UTC))
        expired: list[Execution] = []
        async with self._tx() as conn:
            cursor = await conn.execute(Q["execution_expire_due"], {"now": at, "limit": limit})
            for due in await cursor.fetchall():
                key = {"execution_id": due["execution_id"], "now": at}
                row = await (await conn.execute(Q["execution_expire_one"], key)).fetchone()
                if row is None:
                    continue
                e = execution_row(row)
                detail = {
                    "fromStatus": due["status"],
                    "startBy": None if e.start_by is None else e.start_by.isoformat(),
                    "deadline": None if e.deadline is None else e.deadline.isoformat(),
                }
                await conn.execute(Q["execution_event_expired"], {**key, "detail": _json(detail)})
                expired.append(e)
        return expired

    async def execution_expire_claimed(
        self,
        execution_id: uuid.UUID,
        fencing_token: int,
        error: dict[str, Any],
        now: datetime | None = None,
    ) -> bool:
        at = to_us(now or datetime.now(UTC))
        params = {
            "execution_id": str(execution_id),
            "fencing_token": fencing_token,
            "error": _json(error),
            "now": at,
        }
        async with self._tx() as conn:
            row = await (await conn.execute(Q["execution_expire_claimed"], params)).fetchone()
            if row is None:
                return False
            await conn.execute(Q["attempt_abandon"], {**params, "attempt_number": row[0]})
            detail = _json({"fromStatus": "RUNNING"})
            await conn.execute(Q["execution_event_expired"], {**params, "detail": detail})
        self._signal(Topic.READY)  # a concurrency slot it held is free: waiting work may start
        return True


def _fields(breaker: Breaker) -> dict[str, Any]:
    probe = breaker.probe_execution_id
    return {
        "state": str(breaker.state),
        "consecutive_failures": breaker.consecutive_failures,
        "recent": breaker.recent,
        "cool_down_until": opt_us(breaker.cool_down_until),
        "probe_execution_id": None if probe is None else str(probe),
    }


async def _transitioned(
    conn: aiosqlite.Connection,
    key: dict[str, Any],
    transition: Transition,
    after: Breaker,
    at: int,
) -> bool:
    """The transition's history row and what it does to the breaker's pause; True when the
    workers must be woken (the pause was lifted or a probe let through)."""
    await conn.execute(
        Q["circuit_breaker_transition_insert"],
        {
            **key,
            "from_state": str(transition.from_state),
            "to_state": str(transition.to_state),
            "reason": transition.reason,
            "now": at,
        },
    )
    if after.state is BreakerState.OPEN:
        await conn.execute(Q["pause_breaker_put"], {**key, "reason": transition.reason, "now": at})
        return False
    if after.state is BreakerState.HALF_OPEN:
        probe = {**key, "probe_execution_id": str(after.probe_execution_id)}
        await conn.execute(Q["pause_breaker_probe"], probe)
        return True
    await conn.execute(Q["pause_breaker_clear"], key)
    return True
