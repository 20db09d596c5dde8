"""Pauses and circuit breakers on PostgreSQL (issue 14): mixed into ``PostgresStore``; queries
in ``sql/flow.sql``. The breaker's rule is ``domain.breaker``; this file runs it under the
breaker row's lock, with the transition's history row and pause in the same transaction."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb

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
from tickwheel.store.postgres.notify import Signals
from tickwheel.store.postgres.queries import PostgresQueries
from tickwheel.store.postgres.rows import execution_from_row, opt_aware, require_aware
from tickwheel.store.protocol import Topic
from tickwheel.store.sqlfile import load_queries

Q = load_queries("tickwheel.store.postgres.sql")
Conn = AsyncConnection[DictRow]


def _pause(row: DictRow) -> PauseRecord:
    return PauseRecord(
        row["tenant"],
        row["definition_uri"],
        PauseKind(row["kind"]),
        row["reason"],
        row["paused_at"],
        row["probe_execution_id"],
    )


def _breaker(row: DictRow) -> Breaker:
    return Breaker(
        BreakerState(row["state"]),
        int(row["consecutive_failures"]),
        row["recent"],
        row["cool_down_until"],
        row["probe_execution_id"],
    )


class PostgresFlow(PostgresQueries):
    _signals: Signals
    _tx: Callable[[], AbstractAsyncContextManager[Conn]]
    _signalling_tx: Callable[[], AbstractAsyncContextManager[tuple[Conn, set[Topic]]]]

    async def pause_set(
        self, tenant: str, definition_uri: str, reason: str, now: datetime
    ) -> PauseRecord:
        key = {"tenant": tenant, "definition_uri": definition_uri}
        async with self._tx() as conn:
            params = {**key, "reason": reason, "now": require_aware(now)}
            await conn.execute(Q["pause_set"], params)
            cursor = await conn.execute(Q["pause_get"], {**key, "kind": str(PauseKind.MANUAL)})
            row = await cursor.fetchone()
        assert row is not None  # inserted or already there, in this transaction
        return _pause(row)

    async def pause_clear(self, tenant: str, definition_uri: str) -> bool:
        async with self._signalling_tx() as (conn, topics):
            params = {"tenant": tenant, "definition_uri": definition_uri}
            cursor = await conn.execute(Q["pause_clear"], params)
            if cursor.rowcount:
                topics.add(Topic.READY)  # what the pause held back is claimable now
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
        at = require_aware(now)
        async with self._signalling_tx() as (conn, topics):
            cursor = await conn.execute(Q["circuit_breaker_lock"], {**key, "now": at})
            row = await cursor.fetchone()
            assert row is not None
            before = _breaker(row)
            after, transition = after_attempt(config, before, execution_id, failed, at)
            if after != before:
                await conn.execute(Q["circuit_breaker_put"], {**key, **_fields(after), "now": at})
            if transition is not None:
                await _transitioned(conn, key, transition, after, at, topics)
        return transition

    async def circuit_breaker_probe(self, now: datetime | None = None) -> list[str]:
        # Asked every second by one scheduler, and nearly always of nothing: first one
        # autocommit statement (a row it finds is locked and let go at once), the transaction
        # only when a breaker is due. BEGIN and COMMIT were two of an idle process's eight round
        # trips a second (docs/scaling.md, "An idle worker's claims while it hears").
        if not await self._all("circuit_breaker_probe_due", {"now": opt_aware(now)}):
            return []
        moved: list[str] = []
        async with self._signalling_tx() as (conn, topics):
            cursor = await conn.execute(Q["circuit_breaker_probe_due"], {"now": opt_aware(now)})
            for row in await cursor.fetchall():
                key = {"tenant": row["tenant"], "definition_uri": row["definition_uri"]}
                picked = await (await conn.execute(Q["circuit_breaker_probe_pick"], key)).fetchone()
                if picked is None:
                    continue  # nothing to probe with yet: stays as it is until work arrives
                after, transition = start_probe(_breaker(row), picked["execution_id"])
                at = row["at"]  # the caller's instant, else the database's clock
                await conn.execute(Q["circuit_breaker_put"], {**key, **_fields(after), "now": at})
                await _transitioned(conn, key, transition, after, at, topics)
                moved.append(row["definition_uri"])
        return moved

    async def flow_passes_due(self, now: datetime | None = None) -> DuePasses:
        row = await self._one("flow_passes_due", {"now": opt_aware(now)})
        return DuePasses(bool(row and row["breakers"]), bool(row and row["expiry"]))

    async def circuit_breaker_list(self, tenant: str) -> list[BreakerRecord]:
        rows = await self._all("circuit_breaker_list", {"tenant": tenant})
        return [
            BreakerRecord(r["tenant"], r["definition_uri"], _breaker(r), r["updated_at"])
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
                r["at"],
            )
            for r in await self._all("circuit_breaker_transitions", params)
        ]

    async def circuit_breaker_counts(self) -> Sequence[tuple[BreakerState, int]]:
        rows = await self._all("circuit_breaker_counts", {})
        return [(BreakerState(r["state"]), int(r["n"])) for r in rows]

    async def execution_expire_due(
        self, now: datetime | None = None, limit: int = 500
    ) -> list[Execution]:
        # One statement, so its own transaction (autocommit): no BEGIN and COMMIT around it.
        rows = await self._all("execution_expire_due", {"now": opt_aware(now), "limit": limit})
        return [execution_from_row(r) for r in rows]

    async def execution_expire_claimed(
        self,
        execution_id: uuid.UUID,
        fencing_token: int,
        error: dict[str, Any],
        now: datetime | None = None,
    ) -> bool:
        params = {
            "execution_id": execution_id,
            "fencing_token": fencing_token,
            "error": Jsonb(error),
            "now": opt_aware(now),
            **self._signals.ready_wakeup(),
        }
        row = await self._one("execution_expire_claimed", params)
        if row is not None and row["woken"]:
            self._signals.signal([Topic.READY])  # this process's workers, without a round trip
        return row is not None and int(row["n"]) == 1


def _fields(breaker: Breaker) -> dict[str, Any]:
    return {
        "state": str(breaker.state),
        "consecutive_failures": breaker.consecutive_failures,
        "recent": breaker.recent,
        "cool_down_until": breaker.cool_down_until,
        "probe_execution_id": breaker.probe_execution_id,
    }


async def _transitioned(
    conn: Conn,
    key: dict[str, Any],
    transition: Transition,
    after: Breaker,
    at: datetime,
    topics: set[Topic],
) -> None:
    """The transition's history row and what it does to the breaker's pause."""
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
    elif after.state is BreakerState.HALF_OPEN:
        probe = {**key, "probe_execution_id": after.probe_execution_id}
        await conn.execute(Q["pause_breaker_probe"], probe)
        topics.add(Topic.READY)  # the probe is claimable now
    else:
        await conn.execute(Q["pause_breaker_clear"], key)
        topics.add(Topic.READY)
