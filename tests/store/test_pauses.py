"""Pauses in the store, on both backends: a paused tenant or definition keeps its READY
executions READY (the claim passes them by), other tenants and definitions are claimed as
usual, a resume makes them claimable at once, and a breaker's pause lets only its probe by."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from tests.factories import T0, definition, new_execution
from tickwheel.domain.breaker import BreakerConfig, BreakerState
from tickwheel.domain.rate_limits import RateLimitSpec
from tickwheel.domain.states import ExecutionStatus
from tickwheel.store.flow_protocol import TENANT_WIDE, PauseKind
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.protocol import Store

LEASE = timedelta(seconds=30)
GREET = "registry://jobs/greet"
OTHER = "registry://jobs/other"


async def test_a_paused_definition_is_passed_by_and_claimed_once_resumed(store: Store) -> None:
    held = new_execution()
    other = new_execution(d=definition("other"))
    theirs = new_execution("globex")
    await store.execution_insert_many([held, other, theirs])
    pause = await store.pause_set("acme", GREET, "maintenance", T0)
    assert (pause.kind, pause.reason, pause.paused_at) == (PauseKind.MANUAL, "maintenance", T0)
    again = await store.pause_set("acme", GREET, "another reason", T0 + LEASE)
    assert again == pause  # the first pause stays

    claimed = await store.execution_claim_ready("w1", 10, LEASE, T0)
    assert {c.execution_id for c in claimed} == {other.execution_id, theirs.execution_id}
    got = await store.execution_get("acme", held.execution_id)
    assert got is not None and got.status is ExecutionStatus.READY  # waits, not failed

    assert await store.pause_clear("acme", GREET) is True
    assert await store.pause_clear("acme", GREET) is False
    [resumed] = await store.execution_claim_ready("w1", 10, LEASE, T0)
    assert resumed.execution_id == held.execution_id


async def test_a_paused_tenant_holds_every_definition_of_its_own_only(store: Store) -> None:
    mine = [new_execution(), new_execution(d=definition("other"))]
    theirs = new_execution("globex")
    await store.execution_insert_many([*mine, theirs])
    await store.pause_set("acme", TENANT_WIDE, "", T0)
    claimed = await store.execution_claim_ready("w1", 10, LEASE, T0)
    assert [c.execution_id for c in claimed] == [theirs.execution_id]
    assert [p.definition_uri for p in await store.pause_list("acme")] == [TENANT_WIDE]
    assert await store.pause_list("globex") == []
    # Another tenant's resume lifts nothing.
    assert await store.pause_clear("globex", TENANT_WIDE) is False
    assert await store.execution_claim_ready("w1", 10, LEASE, T0) == []
    await store.pause_clear("acme", TENANT_WIDE)
    assert len(await store.execution_claim_ready("w1", 10, LEASE, T0)) == 2


async def test_an_open_breaker_pauses_and_its_probe_alone_passes_until_it_closes(
    store: Store,
) -> None:
    config = BreakerConfig(consecutive_failures=2, cool_down=60)
    first, second = new_execution(), new_execution()
    await store.execution_insert_many([first, second])
    once = await store.circuit_breaker_record("acme", GREET, config, first.execution_id, True, T0)
    assert once is None
    assert await store.pause_list("acme") == []
    opened = await store.circuit_breaker_record("acme", GREET, config, first.execution_id, True, T0)
    assert opened is not None and opened.to_state is BreakerState.OPEN
    [pause] = await store.pause_list("acme")
    assert (pause.kind, pause.reason) == (PauseKind.BREAKER, "2 consecutive failed attempts")
    assert await store.execution_claim_ready("w1", 10, LEASE, T0) == []

    # Not before the cool-down; then one probe, the first in claim order.
    assert len(await store.circuit_breaker_probe(T0 + timedelta(seconds=59))) == 0
    assert len(await store.circuit_breaker_probe(T0 + timedelta(seconds=60))) == 1
    assert len(await store.circuit_breaker_probe(T0 + timedelta(seconds=61))) == 0
    [probe] = await store.execution_claim_ready("w1", 10, LEASE, T0 + timedelta(seconds=61))
    assert probe.execution_id == first.execution_id
    assert await store.execution_claim_ready("w1", 10, LEASE, T0 + timedelta(seconds=61)) == []

    # Another execution's result says nothing while half-open; the probe's closes it.
    at = T0 + timedelta(seconds=62)
    assert not await store.circuit_breaker_record(
        "acme", GREET, config, second.execution_id, True, at
    )
    closed = await store.circuit_breaker_record(
        "acme", GREET, config, probe.execution_id, False, at
    )
    assert closed is not None and closed.to_state is BreakerState.CLOSED
    assert await store.pause_list("acme") == []
    [rest] = await store.execution_claim_ready("w1", 10, LEASE, at)
    assert rest.execution_id == second.execution_id

    history = await store.circuit_breaker_transitions("acme", GREET, 10)
    assert [(t.from_state, t.to_state) for t in history] == [
        (BreakerState.HALF_OPEN, BreakerState.CLOSED),
        (BreakerState.OPEN, BreakerState.HALF_OPEN),
        (BreakerState.CLOSED, BreakerState.OPEN),
    ]
    assert [t.at for t in history] == [at, T0 + timedelta(seconds=60), T0]
    [breaker] = await store.circuit_breaker_list("acme")
    assert breaker.breaker.state is BreakerState.CLOSED
    assert dict(await store.circuit_breaker_counts()) == {BreakerState.CLOSED: 1}


async def test_a_failed_probe_reopens_and_a_cancelled_one_is_replaced(store: Store) -> None:
    config = BreakerConfig(consecutive_failures=1, cool_down=10)
    first, second = new_execution(), new_execution()
    await store.execution_insert_many([first, second])
    await store.circuit_breaker_record("acme", GREET, config, first.execution_id, True, T0)
    await store.circuit_breaker_probe(T0 + timedelta(seconds=10))
    [probe] = await store.execution_claim_ready("w1", 10, LEASE, T0 + timedelta(seconds=10))
    again = await store.circuit_breaker_record(
        "acme", GREET, config, probe.execution_id, True, T0 + timedelta(seconds=11)
    )
    assert again is not None and again.reason.startswith("the probe (execution")
    assert again.to_state is BreakerState.OPEN
    [pause] = await store.pause_list("acme")
    assert pause.probe_execution_id is None
    # The next probe is cancelled before it runs: the sweep picks another.
    assert len(await store.circuit_breaker_probe(T0 + timedelta(seconds=21))) == 1
    [pause] = await store.pause_list("acme")
    assert pause.probe_execution_id == second.execution_id
    assert await store.execution_cancel("acme", second.execution_id, T0 + timedelta(seconds=22))
    assert len(await store.circuit_breaker_probe(T0 + timedelta(seconds=22))) == 0  # none READY
    third = new_execution()
    await store.execution_insert_many([third])
    assert len(await store.circuit_breaker_probe(T0 + timedelta(seconds=23))) == 1
    [pause] = await store.pause_list("acme")
    assert pause.probe_execution_id == third.execution_id


async def test_a_manual_pause_and_a_breaker_are_lifted_separately(store: Store) -> None:
    config = BreakerConfig(consecutive_failures=1, cool_down=10)
    ex = new_execution()
    await store.execution_insert_many([ex])
    await store.circuit_breaker_record("acme", GREET, config, ex.execution_id, True, T0)
    await store.pause_set("acme", GREET, "by hand", T0)
    assert await store.pause_clear("acme", GREET)
    assert await store.execution_claim_ready("w1", 10, LEASE, T0) == []  # the breaker's stays
    assert [p.kind for p in await store.pause_list("acme")] == [PauseKind.BREAKER]


async def test_flow_controls_present_sees_any_pause_or_rate_limit(store: Store) -> None:
    assert not await store.flow_controls_present()
    await store.pause_set("acme", GREET, "maintenance", T0)
    assert await store.flow_controls_present()
    await store.pause_clear("acme", GREET)
    assert not await store.flow_controls_present()
    await store.rate_limit_set("globex", TENANT_WIDE, RateLimitSpec(1, 60.0), None, T0)
    assert await store.flow_controls_present()


async def test_the_idle_passes_open_no_transaction(store: Store) -> None:
    """One scheduler asks every second for breakers to probe and executions past their startBy,
    and nearly always finds none: on PostgreSQL that is one autocommit statement each, no BEGIN
    and COMMIT around it (two of an idle process's round trips a second each). A due breaker
    still moves in its transaction."""
    if not isinstance(store, PostgresStore):
        return  # SQLite: no round trips to save
    opened: list[str] = []
    tx = store._tx

    @asynccontextmanager
    async def counted() -> AsyncIterator[Any]:
        opened.append("tx")
        async with tx() as conn:
            yield conn

    store._tx = counted  # type: ignore[method-assign]
    assert await store.circuit_breaker_probe(T0) == []
    assert await store.execution_expire_due(T0) == []
    assert opened == []
    config = BreakerConfig(consecutive_failures=1, cool_down=10)
    first = new_execution()
    await store.execution_insert_many([first])
    await store.circuit_breaker_record("acme", GREET, config, first.execution_id, True, T0)
    opened.clear()
    assert await store.circuit_breaker_probe(T0 + timedelta(seconds=10)) == [GREET]
    assert opened == ["tx"]
