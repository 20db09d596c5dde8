"""A herd's grace check in one call (docs/scaling.md, "A herd's grace in one statement"), on both
backends, on the fake clock: ``shard_lease_grace`` counts the SCHEDULED rows due by the herd's
opening left in the shards asked, and closes those of them where none is left, fenced like the
opening (owner, epoch, expiry), leaving open a shard opened again by a later herd."""

from __future__ import annotations

from tests.factories import T0
from tests.store.test_direct_claims import DUE, LEASE, TTL, S, due, grants, status
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.domain.states import ExecutionStatus
from tickwheel.store.protocol import Store


async def test_the_rows_left_are_counted_and_the_emptied_shards_close(store: Store) -> None:
    kept = due(2)  # shard 7: still due
    emptied = due(2, shard=8)  # shard 8: promoted below
    [later] = due(shard=9, at=9 * S)  # shard 9: due after the herd's opening
    await store.execution_insert_many([*kept, *emptied, later])
    mine = [g for g in await grants(store) if g.shard_id in (7, 8, 9)]
    await store.shard_lease_open("s", mine, DUE, DUE)
    ids = [i.execution_id for i in emptied]
    assert len((await store.execution_promote_ids_leased("s", mine, ids, DUE)).moved) == 2
    # Any order asked: the shards closed come back ascending.
    assert await store.shard_lease_grace("s", mine[::-1], DUE, DUE) == (2, [8, 9])
    # Closed: a row due at the instant in shard 8 since is not claimed as it is; shard 7 is
    # still open and its rows are.
    [late] = due(shard=8)
    await store.execution_insert_many([late])
    claimed = await store.execution_claim_ready("w", 10, LEASE, DUE + S)
    assert {e.execution_id for e in claimed} == {*ids, *(i.execution_id for i in kept)}
    assert await status(store, late) is ExecutionStatus.SCHEDULED
    # The claims emptied shard 7 (shard 8 holds the late row, but it is closed already).
    assert await store.shard_lease_grace("s", mine, DUE, DUE + S) == (1, [7])
    assert await store.shard_lease_grace("s", [], DUE, DUE + S) == (0, [])


async def test_a_stale_holder_closes_nothing_and_still_counts(store: Store) -> None:
    [left] = due(shard=8)
    [cancelled] = due()
    await store.execution_insert_many([left, cancelled])
    old = [g for g in await grants(store, "a") if g.shard_id in (7, 8)]
    await store.shard_lease_open("a", old, DUE, DUE)
    await store.execution_cancel("acme", cancelled.execution_id, DUE)  # shard 7 emptied
    # Another owner naming a's grants, and a at its grants' expiry: nothing closes.
    assert await store.shard_lease_grace("b", old, DUE, DUE) == (1, [])
    assert await store.shard_lease_grace("a", old, DUE, T0 + TTL) == (1, [])
    # a's grants taken over (new epochs): a's grace is refused even by a clock that runs
    # behind and still sees them unexpired; the new holder's closes the emptied shard.
    new = await store.shard_lease_acquire("b", SHARD_COUNT, TTL, T0 + TTL)
    new = [g for g in new if g.shard_id in (7, 8)]
    assert [g.epoch for g in new] == [g.epoch + 1 for g in old]
    assert await store.shard_lease_grace("a", old, DUE, DUE) == (1, [])
    assert await store.shard_lease_grace("b", new, DUE, T0 + TTL) == (1, [7])
    # The same owner's older grant of a shard it holds again is refused as well.
    again = await store.shard_lease_acquire("a", SHARD_COUNT, TTL, T0 + 3 * TTL)
    assert len(again) == SHARD_COUNT
    assert await store.shard_lease_grace("a", old, DUE, T0 + 3 * TTL) == (1, [])


async def test_a_shard_opened_again_by_a_later_herd_stays_open(store: Store) -> None:
    [item] = due()
    await store.execution_insert_many([item])
    mine = [g for g in await grants(store) if g.shard_id == 7]
    await store.shard_lease_open("s", mine, DUE, DUE)
    await store.execution_promote_ids_leased("s", mine, [item.execution_id], DUE)
    await store.shard_lease_open("s", mine, DUE + S, DUE + S)  # a later herd's instant
    assert await store.shard_lease_grace("s", mine, DUE, DUE + S) == (0, [])
    assert await store.shard_lease_grace("s", mine, DUE + S, DUE + S) == (0, [7])


async def test_a_shard_holding_a_row_due_by_the_herd_stays_open_and_is_counted(
    store: Store,
) -> None:
    """Even past the instant its opening reached (the database's clock behind the
    scheduler's): a closed shard holds nothing due by the herd's opening."""
    [item] = due()
    [other] = due(shard=8, at=3 * S)
    await store.execution_insert_many([item, other])
    leases = await grants(store)
    await store.shard_lease_open("s", leases, DUE, DUE - S)  # through DUE - 1 s
    left, closed = await store.shard_lease_grace("s", leases, DUE, DUE)
    assert left == 2
    assert closed == [s for s in range(SHARD_COUNT) if s not in (7, 8)]
    [claimed] = await store.execution_claim_ready("w", 10, LEASE, DUE)  # due by DUE - 1 s
    assert claimed.execution_id == other.execution_id
    await store.execution_promote_ids_leased("s", leases, [item.execution_id], DUE)
    assert await store.shard_lease_grace("s", leases, DUE, DUE) == (0, [7, 8])


async def test_shards_not_counted_are_probed_for_one_row_left(store: Store) -> None:
    """``counted``: those shards' rows are counted whole, the others' as 1 if any is left
    (the scheduler counts a sample, engine/herds.py); the emptied ones close either way."""
    sample = due(3)  # shard 7
    probed = due(4, shard=8)
    emptied = due(2, shard=9)
    await store.execution_insert_many([*sample, *probed, *emptied])
    mine = [g for g in await grants(store) if g.shard_id in (7, 8, 9)]
    await store.shard_lease_open("s", mine, DUE, DUE)
    ids = [i.execution_id for i in emptied]
    assert len((await store.execution_promote_ids_leased("s", mine, ids, DUE)).moved) == 2
    assert await store.shard_lease_grace("s", mine, DUE, DUE, counted={7}) == (3 + 1, [9])
    assert await store.shard_lease_grace("s", mine[:2], DUE, DUE, counted=set()) == (2, [])
    assert await store.shard_lease_grace("s", mine[:2], DUE, DUE, counted={7, 8}) == (7, [])
