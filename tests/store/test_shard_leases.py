"""Shard leases on both backends, on the fake clock: a grant is a new epoch, renewal keeps only
grants still held, expiry lets another owner take over, and a promotion fenced by a lost grant
moves nothing (and says how much it refused)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from tests.factories import T0, new_execution
from tickwheel.domain.models import ShardLease
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.domain.states import ExecutionStatus
from tickwheel.store.protocol import Store

S = timedelta(seconds=1)
TTL = 10 * S


async def test_acquire_takes_free_shards_lowest_first_each_a_new_epoch(store: Store) -> None:
    a = await store.shard_lease_acquire("a", 3, TTL, T0)
    assert [(x.shard_id, x.owner, x.epoch, x.expires_at) for x in a] == [
        (0, "a", 1, T0 + TTL),
        (1, "a", 1, T0 + TTL),
        (2, "a", 1, T0 + TTL),
    ]
    b = await store.shard_lease_acquire("b", 2, TTL, T0)
    assert [x.shard_id for x in b] == [3, 4]
    rest = await store.shard_lease_acquire("c", SHARD_COUNT, TTL, T0)
    assert len(rest) == SHARD_COUNT - 5
    assert await store.shard_lease_acquire("d", 5, TTL, T0) == []  # nothing free
    assert await store.shard_lease_counts(T0) == {"a": 3, "b": 2, "c": SHARD_COUNT - 5, "d": 0}


async def test_renew_keeps_only_grants_still_held(store: Store) -> None:
    held = await store.shard_lease_acquire("a", 2, TTL, T0)
    renewed = await store.shard_lease_renew("a", held, TTL, T0 + 5 * S)
    assert [x.expires_at for x in renewed] == [T0 + 15 * S] * 2
    stale = ShardLease(0, "a", held[0].epoch - 1, T0 + TTL)
    assert await store.shard_lease_renew("a", [stale], TTL, T0 + 6 * S) == []
    assert await store.shard_lease_renew("b", renewed, TTL, T0 + 6 * S) == []  # not b's
    # Expired: not renewed, even though nobody took it yet (re-acquire gives a new epoch).
    assert await store.shard_lease_renew("a", renewed, TTL, T0 + 15 * S) == []
    again = await store.shard_lease_acquire("a", 1, TTL, T0 + 15 * S)
    assert (again[0].shard_id, again[0].epoch) == (0, held[0].epoch + 1)


async def test_expired_shards_are_taken_over_with_a_new_epoch(store: Store) -> None:
    a = await store.shard_lease_acquire("a", 2, TTL, T0)
    assert await store.shard_lease_acquire("b", 2, TTL, T0 + 9 * S) == [
        ShardLease(2, "b", 1, T0 + 19 * S),
        ShardLease(3, "b", 1, T0 + 19 * S),
    ]
    taken = await store.shard_lease_acquire("b", 2, TTL, T0 + TTL)  # at expiry: free
    assert [(x.shard_id, x.epoch) for x in taken] == [(0, 2), (1, 2)]
    assert await store.shard_lease_counts(T0 + TTL) == {"b": 4}  # a's membership expired too
    # a wakes up: its grants are gone, but it is a live member again (holding nothing).
    assert await store.shard_lease_renew("a", a, TTL, T0 + TTL) == []
    assert await store.shard_lease_counts(T0 + TTL) == {"a": 0, "b": 4}


async def test_release_frees_at_once_and_leaving_ends_membership(store: Store) -> None:
    a = await store.shard_lease_acquire("a", 4, TTL, T0)
    await store.shard_lease_release("a", a[2:], T0 + S)
    assert await store.shard_lease_counts(T0 + S) == {"a": 2}
    b = await store.shard_lease_acquire("b", 2, TTL, T0 + S)
    assert [(x.shard_id, x.epoch) for x in b] == [(2, 2), (3, 2)]
    await store.shard_lease_release("a", a[:2], T0 + S, leaving=True)
    assert await store.shard_lease_counts(T0 + S) == {"b": 2}


async def test_promotion_is_fenced_by_the_epoch_and_moves_the_watermark(store: Store) -> None:
    due = [new_execution(execute_in=5, key=f"k{i}") for i in range(40)]
    await store.execution_insert_many(due)
    a = await store.shard_lease_acquire("a", SHARD_COUNT, TTL, T0)
    # b takes everything over after a's leases expired; a still believes in its grants.
    b = await store.shard_lease_acquire("b", SHARD_COUNT, TTL, T0 + TTL)
    stale = await store.execution_promote_due_leased("a", a, 500, T0 + TTL)
    assert stale.promoted == 0 and stale.refused == 40 and len(stale.fenced) == SHARD_COUNT
    assert (await store.execution_count_by_status())[ExecutionStatus.SCHEDULED] == 40
    # Unexpired but another epoch: refused as well (a grant is not an owner name).
    fresh = await store.execution_promote_due_leased("b", b, 500, T0 + TTL)
    assert (fresh.promoted, fresh.fenced, fresh.refused) == (40, [], 0)
    renewed = await store.shard_lease_renew("b", b, TTL, T0 + TTL + S)
    assert {x.watermark for x in renewed} == {T0 + TTL}
    old_epoch = [ShardLease(x.shard_id, "b", x.epoch - 1, x.expires_at) for x in renewed[:3]]
    # Nothing due in their shards: nothing to fence (an idle round locks nothing).
    idle = await store.execution_promote_due_leased("b", old_epoch, 500, T0 + TTL + S)
    assert (idle.promoted, idle.fenced, idle.refused) == (0, [], 0)
    late = replace(new_execution(execute_in=11, key="late"), shard_id=renewed[0].shard_id)
    await store.execution_insert_many([late])
    refused = await store.execution_promote_due_leased("b", old_epoch, 500, T0 + TTL + 2 * S)
    assert refused.promoted == 0 and refused.fenced == [x.shard_id for x in renewed[:3]]
    assert refused.refused == 1


async def test_an_idle_catch_all_locks_and_writes_nothing(store: Store) -> None:
    """Nothing due in any shard and none open: the leased catch-all reads and returns, its
    lease rows untouched (the watermark stays where it was). An idle scheduler runs it every few
    seconds over all its shards; it locked and rewrote every lease row each time
    (docs/scaling.md, "What an idle scheduler costs"). Once something is due it promotes and
    moves the watermark as before."""
    await store.execution_insert_many([new_execution(execute_in=3600, key="later")])
    a = await store.shard_lease_acquire("a", SHARD_COUNT, TTL, T0)
    idle = await store.execution_promote_due_leased("a", a, 500, T0 + S)
    assert (idle.promoted, idle.fenced, idle.refused) == (0, [], 0)
    renewed = await store.shard_lease_renew("a", a, TTL, T0 + 2 * S)
    assert {x.watermark for x in renewed} == {None}
    await store.execution_insert_many([new_execution(execute_in=2, key="due")])
    busy = await store.execution_promote_due_leased("a", renewed, 500, T0 + 3 * S)
    assert busy.promoted == 1
    renewed = await store.shard_lease_renew("a", renewed, TTL, T0 + 4 * S)
    assert {x.watermark for x in renewed} == {T0 + 3 * S}


async def test_firing_by_id_is_fenced_per_shard_by_the_grant(store: Store) -> None:
    """The wheel's leased firing (one statement on PostgreSQL): the ids of shards whose grant is
    held are promoted, those of a lost or stale grant stay SCHEDULED and their shards are named,
    and an execution of a shard it was never granted is not touched."""
    items = [new_execution(execute_in=5, key=f"k{i}") for i in range(40)]
    ids = [o.execution.execution_id for o in await store.execution_insert_many(items)]
    shard_of = {i.execution_id: i.shard_id for i in items}
    a = await store.shard_lease_acquire("a", SHARD_COUNT, TTL, T0)
    b = await store.shard_lease_acquire("b", SHARD_COUNT, TTL, T0 + TTL)  # a's expired: all b's
    stale = await store.execution_promote_ids_leased("a", a, ids, T0 + TTL)
    assert stale.promoted == 0 and len(stale.fenced) == SHARD_COUNT
    assert (await store.execution_count_by_status())[ExecutionStatus.SCHEDULED] == 40
    first, second = ids[:20], ids[20:]
    lost = {shard_of[i] for i in first} - {shard_of[i] for i in second}
    mixed = [
        x if x.shard_id not in lost else ShardLease(x.shard_id, "b", x.epoch - 1, x.expires_at)
        for x in b
    ]
    partly = await store.execution_promote_ids_leased("b", mixed, ids, T0 + TTL)
    assert partly.fenced == sorted(lost)
    assert set(partly.moved) == {i for i in ids if shard_of[i] not in lost}
    mine = [x for x in b if x.shard_id in lost]
    rest = await store.execution_promote_ids_leased("b", mine, ids, T0 + TTL)
    assert (set(rest.moved), rest.fenced) == ({i for i in ids if shard_of[i] in lost}, [])
    assert (await store.execution_count_by_status())[ExecutionStatus.READY] == 40
