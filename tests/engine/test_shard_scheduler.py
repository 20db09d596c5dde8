"""The leased scheduler on both backends, on the fake clock: owners split the shards evenly
without a coordinator, a newcomer gets its share, a lost grant is fenced out."""

from __future__ import annotations

from dataclasses import replace

from tests.factories import T0, new_execution
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.engine.scheduler import Scheduler, shard_target
from tickwheel.store.protocol import Store


def test_targets_add_up_to_every_shard() -> None:
    for n in range(1, 9):
        owners = [f"s{i}" for i in range(n)]
        shares = [shard_target(o, owners) for o in owners]
        assert sum(shares) == SHARD_COUNT and max(shares) - min(shares) <= 1
    assert sorted(shard_target(o, ["a", "b", "c"]) for o in "abc") == [341, 341, 342]


async def test_schedulers_split_rebalance_and_fence(store: Store) -> None:
    clock = FakeClock(T0)
    a, b = (Scheduler(store, clock, leased=True, owner=o) for o in ("a", "b"))
    await a.run_once()
    assert len(a.leases) == SHARD_COUNT  # alone: everything
    await b.run_once()  # joins with nothing free: a member holding 0
    clock.advance(a.renew_every.total_seconds())
    await a.run_once()  # a sees b, releases its excess
    await b.run_once()
    assert (len(a.leases), len(b.leases)) == (512, 512)

    await store.execution_insert_many(
        [new_execution(execute_in=20, key=f"k{i}") for i in range(30)]
    )
    clock.advance(20.0)  # a and b both paused past their leases; only b comes back first
    await b.run_once()  # nothing held any more: it re-acquires everything free
    assert len(b.leases) == SHARD_COUNT
    await b.run_once()
    assert b.promoted == 30
    # Due by now in a's old shards, not promoted yet: a, back with its stale grants, promotes
    # first. Its catch-all finds work, so it fences: all refused, nothing moved. (With nothing
    # due a round takes no fence at all, and a learns of its loss at its next renewal.)
    late = [replace(new_execution(execute_in=21, key=f"late{i}"), shard_id=i) for i in range(5)]
    await store.execution_insert_many(late)
    await a.run_once()
    assert a.fenced_shards == 512 and a.refused == 5 and a.promoted == 0
    await b.run_once()
    assert b.promoted == 35
