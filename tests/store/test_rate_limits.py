"""Rate limits in the store, on both backends: a bucket lets at most its tokens start, refills
with time (the claim's instant, a fake clock here), tells the claimer when its next token comes,
and holds back only its own definition or tenant: the others are claimed as usual."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from tests.factories import T0, definition, new_execution
from tickwheel.domain.rate_limits import RateLimitSpec
from tickwheel.domain.states import ExecutionStatus
from tickwheel.store.engine_protocol import retry_after
from tickwheel.store.flow_protocol import TENANT_WIDE
from tickwheel.store.protocol import Store

LEASE = timedelta(seconds=30)
GREET = "registry://jobs/greet"
OTHER = "registry://jobs/other"


def at(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


async def test_a_bucket_lets_its_tokens_start_then_refills_with_time(store: Store) -> None:
    await store.rate_limit_set("acme", GREET, RateLimitSpec(2, 1.0), 1, T0)
    await store.execution_insert_many([new_execution() for _ in range(8)])

    first = await store.execution_claim_ready("w1", 10, LEASE, T0)
    assert len(first) == 2  # the full bucket
    empty = await store.execution_claim_ready("w1", 10, LEASE, T0)
    assert empty == []
    assert retry_after(empty) == pytest.approx(0.5)  # 2 a second: the next token in 0.5 s
    assert await store.execution_claim_ready("w1", 10, LEASE, T0 + at(0.25)) == []
    assert len(await store.execution_claim_ready("w1", 10, LEASE, T0 + at(0.5))) == 1
    # Idle for long: the bucket holds its burst (2), not 20 tokens.
    assert len(await store.execution_claim_ready("w1", 10, LEASE, T0 + at(10.5))) == 2
    [bucket] = await store.rate_limit_list("acme", T0 + at(10.5))
    assert (bucket.definition_uri, bucket.spec.limit, bucket.source_version) == (GREET, 2, 1)
    assert bucket.tokens == pytest.approx(0.0)


async def test_a_burst_above_the_limit_starts_at_once_then_the_rate_holds(store: Store) -> None:
    await store.rate_limit_set("acme", GREET, RateLimitSpec(1, 2.0, burst=5), 1, T0)
    await store.execution_insert_many([new_execution() for _ in range(10)])
    assert len(await store.execution_claim_ready("w1", 10, LEASE, T0)) == 5
    empty = await store.execution_claim_ready("w1", 10, LEASE, T0)
    assert retry_after(empty) == pytest.approx(2.0)
    assert len(await store.execution_claim_ready("w1", 10, LEASE, T0 + at(4))) == 2


async def test_an_exhausted_definition_does_not_hold_back_the_others(store: Store) -> None:
    await store.rate_limit_set("acme", GREET, RateLimitSpec(1, 60.0), 1, T0)
    # The limited ones come first in claim order (higher priority): they must not block.
    limited = [new_execution(priority=9) for _ in range(5)]
    free = [new_execution(d=definition("other")) for _ in range(3)]
    theirs = new_execution("globex", priority=9)  # another tenant's greet: its own budget
    await store.execution_insert_many([*limited, *free, theirs])

    claimed = await store.execution_claim_ready("w1", 10, LEASE, T0)
    by_uri = sorted((c.tenant, c.definition_uri) for c in claimed)
    assert by_uri == [("acme", GREET)] + [("acme", OTHER)] * 3 + [("globex", GREET)]
    assert await store.execution_claim_ready("w1", 10, LEASE, T0) == []
    left = [await store.execution_get("acme", e.execution_id) for e in limited]
    assert sum(1 for e in left if e is not None and e.status is ExecutionStatus.READY) == 4


async def test_a_tenant_limit_holds_all_its_definitions_and_no_other_tenant(store: Store) -> None:
    await store.rate_limit_set("acme", TENANT_WIDE, RateLimitSpec(3, 1.0), None, T0)
    mine = [new_execution(priority=5) for _ in range(3)] + [
        new_execution(d=definition("other")) for _ in range(3)
    ]
    theirs = [new_execution("globex") for _ in range(4)]
    await store.execution_insert_many([*mine, *theirs])
    claimed = await store.execution_claim_ready("w1", 20, LEASE, T0)
    assert sum(1 for c in claimed if c.tenant == "acme") == 3
    assert sum(1 for c in claimed if c.tenant == "globex") == 4
    assert {c.definition_uri for c in claimed if c.tenant == "acme"} == {GREET}
    # A definition's own bucket and the tenant's: a start takes a token of each.
    await store.rate_limit_set("acme", OTHER, RateLimitSpec(1, 1.0), 1, T0)
    await store.execution_insert_many([new_execution(now=T0 + at(1)) for _ in range(3)])
    later = await store.execution_claim_ready("w1", 20, LEASE, T0 + at(1))
    assert sorted(c.definition_uri for c in later) == [GREET, GREET, OTHER]
    assert await store.rate_limit_clear("acme", TENANT_WIDE) is True
    assert await store.rate_limit_clear("acme", TENANT_WIDE) is False
    assert [b.definition_uri for b in await store.rate_limit_list("acme")] == [OTHER]


async def test_concurrent_claimers_share_one_budget(store: Store) -> None:
    await store.rate_limit_set("acme", GREET, RateLimitSpec(20, 1.0), 1, T0)
    await store.execution_insert_many([new_execution() for _ in range(100)])

    async def claim(worker: str) -> int:
        return len(await store.execution_claim_ready(worker, 10, LEASE, T0))

    counts = await asyncio.gather(*(claim(f"w{i}") for i in range(8)))
    assert sum(counts) == 20
    again = await asyncio.gather(*(claim(f"w{i}") for i in range(8)))
    assert sum(again) == 0


async def test_a_definition_bucket_follows_its_newest_version(store: Store) -> None:
    await store.rate_limit_sync("acme", GREET, 2, RateLimitSpec(5, 1.0))
    await store.rate_limit_sync("acme", GREET, 1, RateLimitSpec(50, 1.0))  # older: no change
    [bucket] = await store.rate_limit_list("acme", T0)
    assert (bucket.spec.limit, bucket.source_version) == (5, 2)
    await store.rate_limit_sync("acme", GREET, 3, None)  # a version without a limit
    assert await store.rate_limit_list("acme", T0) == []


async def test_waiting_counts_the_ready_rows_under_a_bucket(store: Store) -> None:
    assert await store.rate_limit_waiting() == {}
    await store.rate_limit_set("acme", GREET, RateLimitSpec(1, 60.0), 1, T0)
    await store.execution_insert_many([new_execution() for _ in range(3)])
    await store.execution_insert_many([new_execution(d=definition("other"))])
    await store.execution_claim_ready("w1", 10, LEASE, T0)
    assert await store.rate_limit_waiting() == {GREET: 2}


async def test_a_rate_limit_and_a_concurrency_limit_hold_together(store: Store) -> None:
    from tests.store.test_concurrency import keyed

    await store.rate_limit_set("acme", "registry://jobs/sync", RateLimitSpec(3, 1.0), 1, T0)
    # Two customers, limit 1 each (fifo): at most 2 run, and at most 3 start per second.
    await store.execution_insert_many([keyed(c, n) for n in range(3) for c in ("a", "b")])
    first = await store.execution_claim_ready("w1", 10, LEASE, T0)
    assert sorted(e.concurrency.key for e in first if e.concurrency) == ["a", "b"]
    # Both keys busy: nothing starts, and the token the rate step did not spend stays.
    assert await store.execution_claim_ready("w1", 10, LEASE, T0) == []
    [bucket] = await store.rate_limit_list("acme", T0)
    assert bucket.tokens == pytest.approx(1.0)
