"""Fair claiming across tenants (docs/flow-control.md, "Fair claiming"), on both backends: a
tenant's deep backlog does not hold another tenant's READY work back by more than one claim,
priority still orders work within a tenant, and pauses and concurrency limits still apply."""

from __future__ import annotations

from datetime import timedelta

from tests.factories import T0, new_execution
from tests.store.test_concurrency import keyed
from tickwheel.store.protocol import Store

LEASE = timedelta(seconds=30)


async def test_one_ready_execution_of_another_tenant_is_in_the_first_claim(store: Store) -> None:
    backlog = [new_execution("big") for _ in range(20_000)]
    for start in range(0, len(backlog), 2_000):
        await store.execution_insert_many(backlog[start : start + 2_000])
    # Created after the whole backlog, and of the lowest priority: in claim order it is last.
    [late] = await store.execution_insert_many(
        [new_execution("small", now=T0 + timedelta(seconds=1), priority=-5)]
    )
    first = await store.execution_claim_ready("w0", 10, LEASE, T0 + timedelta(seconds=2))
    assert len(first) == 10
    assert late.execution.execution_id in {e.execution_id for e in first}
    assert sum(e.tenant == "big" for e in first) == 9
    # Only one tenant left: the batch is the backlog's again, full.
    second = await store.execution_claim_ready("w0", 10, LEASE, T0 + timedelta(seconds=2))
    assert len(second) == 10 and {e.tenant for e in second} == {"big"}


async def test_tenants_take_turns_and_priority_orders_within_a_tenant(store: Store) -> None:
    a = [new_execution("a", priority=p) for p in (0, 5, 1, 3)]
    b = [new_execution("b", priority=p, now=T0 + timedelta(seconds=1)) for p in (0, 9)]
    await store.execution_insert_many([*a, *b])
    claimed = await store.execution_claim_ready("w0", 4, LEASE, T0 + timedelta(seconds=2))
    # Each tenant's best first, then each tenant's second best.
    assert {(e.tenant, e.priority) for e in claimed} == {("a", 5), ("a", 3), ("b", 9), ("b", 0)}
    rest = await store.execution_claim_ready("w0", 4, LEASE, T0 + timedelta(seconds=2))
    assert [(e.tenant, e.priority) for e in rest] == [("a", 1), ("a", 0)]


async def test_a_paused_tenant_stays_held_back_and_leaves_its_turns_to_the_others(
    store: Store,
) -> None:
    await store.execution_insert_many([new_execution("a") for _ in range(5)])
    await store.execution_insert_many([new_execution("b") for _ in range(5)])
    await store.pause_set("a", "", "manual", T0)
    claimed = await store.execution_claim_ready("w0", 4, LEASE, T0 + timedelta(seconds=1))
    assert [e.tenant for e in claimed] == ["b"] * 4


async def test_concurrency_limits_apply_to_the_fair_claim(store: Store) -> None:
    # Tenant acme: three of one key under limit 1; tenant other: two without a limit.
    await store.execution_insert_many([keyed("k", n, at=n) for n in range(3)])
    await store.execution_insert_many([new_execution("other") for _ in range(2)])
    claimed = await store.execution_claim_ready("w0", 10, LEASE, T0 + timedelta(seconds=5))
    assert sorted(e.tenant for e in claimed) == ["acme", "other", "other"]


async def test_weights_share_the_batch_in_proportion(store: Store) -> None:
    await store.execution_insert_many([new_execution("heavy") for _ in range(200)])
    await store.execution_insert_many([new_execution("light") for _ in range(200)])
    await store.tenant_weight_set("heavy", 3)
    assert await store.tenant_weight_get("heavy") == 3
    assert await store.tenant_weight_get("light") == 1
    counts = {"heavy": 0, "light": 0}
    for _ in range(10):
        for e in await store.execution_claim_ready("w0", 8, LEASE, T0 + timedelta(seconds=1)):
            counts[e.tenant] += 1
    assert sum(counts.values()) == 80
    assert counts == {"heavy": 60, "light": 20}  # 3:1, each claim of 8 two turns of 3 + 1
    await store.tenant_weight_set("heavy", None)
    assert await store.tenant_weight_get("heavy") == 1
    again = await store.execution_claim_ready("w0", 8, LEASE, T0 + timedelta(seconds=1))
    assert sum(e.tenant == "heavy" for e in again) == 4
