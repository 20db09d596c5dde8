"""A leased scheduler at an instant with due executions, on both backends, on the fake clock
(docs/scaling.md, "Claiming a herd without promoting it"): it opens their shards to the plain
claim and promotes at once only what that claim cannot take; what the claims leave is promoted
once a ``DIRECT_GRACE`` passes in which they took none of it, and the shards close; a scheduler
that dies with shards open leaves nothing stranded (its successor's rescan promotes the rest);
the catch-all leaves a shard in its grace to the claims; and an instant of several tenants or
priorities is promoted, not opened, so that it is claimed fairly and by priority."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Any

from tests.engine.test_wheel_scheduler import insert, listening, status
from tests.engine.test_wheel_scheduler import scheduler as wheel_scheduler
from tests.factories import T0, definition, new_execution
from tests.store.test_concurrency import KEYED
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import SubmitRequest, prepare_execution
from tickwheel.engine.scheduler import ARM_LEAD, DIRECT_GRACE, Scheduler
from tickwheel.store.due import DueSlice
from tickwheel.store.protocol import Store

__all__ = ["listening"]  # the fixture, used by every test here

LEASE = timedelta(seconds=30)
SECOND = timedelta(seconds=1)


def scheduler(store: Store, clock: FakeClock, **options: object) -> Scheduler:
    """Opening even for an instant of one execution (``DIRECT_MIN`` is for herds)."""
    s = wheel_scheduler(store, clock, **options)
    s.direct_min = 1
    return s


async def due_in(store: Store, execution_id: uuid.UUID) -> uuid.UUID:
    """A new execution, SCHEDULED (submitted at T0), due at T0 + 5 s in the shard of
    ``execution_id``: a shard still open through that instant would hand it to a claim."""
    got = await store.execution_get("acme", execution_id)
    assert got is not None
    item = replace(new_execution(execute_in=5), shard_id=got.shard_id)
    await store.execution_insert_many([item])
    return item.execution_id


async def test_an_instants_rows_are_claimed_as_they_are_then_the_rest_promoted(
    store: Store,
) -> None:
    clock = FakeClock(T0)
    s = scheduler(store, clock, leased=True, owner="a")
    await s.run_once()  # alone: takes every shard
    ids = await insert(store, clock, 5, 5, 5, 5)
    await s.run_once()  # the hints: into the wheel
    clock.set(T0 + 5 * SECOND)
    assert await s.run_once() == 0  # opened, nothing promoted
    assert {await status(store, i) for i in ids} == {ExecutionStatus.SCHEDULED}
    claimed = await store.execution_claim_ready("w", 3, LEASE, clock.now())
    assert len(claimed) == 3 and all(e.ready_at == T0 + 5 * SECOND for e in claimed)
    [left] = set(ids) - {e.execution_id for e in claimed}
    # The claims took rows in this grace: the rest are theirs for another one, not rewritten.
    clock.set(T0 + 5 * SECOND + DIRECT_GRACE)
    assert await s.run_once() == 0
    assert await status(store, left) is ExecutionStatus.SCHEDULED
    # A grace with none taken (here no claim at all): what is left is promoted.
    clock.set(T0 + 5 * SECOND + 2 * DIRECT_GRACE)
    assert await s.run_once() == 1
    assert await status(store, left) is ExecutionStatus.READY
    # The shards are closed: a row due at that instant now waits for its promotion.
    late = await due_in(store, left)
    assert [e.execution_id for e in await store.execution_claim_ready("w", 9, LEASE)] == [left]
    assert await status(store, late) is ExecutionStatus.SCHEDULED


async def test_an_execution_under_a_concurrency_limit_is_promoted_at_its_instant(
    store: Store,
) -> None:
    clock = FakeClock(T0)
    s = scheduler(store, clock, leased=True, owner="a")
    await s.run_once()
    request = SubmitRequest(
        definition_uri="registry://jobs/sync",
        inputs={"customer": "c1"},
        execute_at=T0 + 5 * SECOND,
    )
    limited = prepare_execution(request, KEYED, "acme", T0)
    [plain] = await insert(store, clock, 5)
    await store.execution_insert_many([limited])
    await s.run_once()
    clock.set(T0 + 5 * SECOND)
    assert await s.run_once() == 1
    assert await status(store, limited.execution_id) is ExecutionStatus.READY
    assert await status(store, plain) is ExecutionStatus.SCHEDULED  # the claims' own


async def test_the_catch_all_leaves_a_shard_in_its_grace_to_the_claims(store: Store) -> None:
    clock = FakeClock(T0)
    s = scheduler(store, clock, leased=True, owner="a")
    await s.run_once()
    ids = await insert(store, clock, 5, 5)
    await s.run_once()
    clock.set(T0 + 5 * SECOND)
    await s.run_once()
    # The catch-all over every grant (each extension of the window and each lease renewal runs
    # it), inside the instant's grace.
    clock.set(T0 + 5 * SECOND + DIRECT_GRACE / 2)
    assert await s._sweep() == 0
    assert {await status(store, i) for i in ids} == {ExecutionStatus.SCHEDULED}
    assert len(await store.execution_claim_ready("w", 9, LEASE, clock.now())) == 2


async def test_a_scheduler_that_dies_with_shards_open_strands_nothing(store: Store) -> None:
    clock = FakeClock(T0)
    a = scheduler(store, clock, leased=True, owner="a")
    await a.run_once()
    ids = await insert(store, clock, 5, 5, 5)
    await a.run_once()
    clock.set(T0 + 5 * SECOND)
    await a.run_once()  # opened; then a dies before the grace ends
    # Meanwhile the claims still take the open shards' rows, scheduler or not.
    [first] = await store.execution_claim_ready("w", 1, LEASE, clock.now() + SECOND)
    # b takes the shards over once a's leases expire: its rescan promotes the rest.
    clock.set(T0 + 5 * SECOND + a.lease_ttl)
    b = scheduler(store, clock, leased=True, owner="b")
    await b.run_once()
    assert len(b.leases) > 0
    rest = [i for i in ids if i != first.execution_id]
    assert {await status(store, i) for i in rest} == {ExecutionStatus.READY}
    # And closed them: a row due at that instant waits for b's wheel, not taken as it is.
    late = await due_in(store, rest[0])
    claimed = await store.execution_claim_ready("w", 9, LEASE, clock.now())
    assert {e.execution_id for e in claimed} == set(rest)
    assert await status(store, late) is ExecutionStatus.SCHEDULED


async def test_an_unleased_scheduler_promotes_at_the_instant(store: Store) -> None:
    clock = FakeClock(T0)
    s = scheduler(store, clock)
    ids = await insert(store, clock, 5, 5)
    await s.run_once()
    clock.set(T0 + 5 * SECOND)
    assert await s.run_once() == 2
    assert {await status(store, i) for i in ids} == {ExecutionStatus.READY}


async def test_a_small_instant_is_promoted_at_once(store: Store) -> None:
    """Below ``direct_min`` entries an instant is promoted as before: one statement, where an
    opening costs four."""
    clock = FakeClock(T0)
    s = wheel_scheduler(store, clock, leased=True, owner="a")
    s.direct_min = 3
    await s.run_once()
    small = await insert(store, clock, 5, 5)
    herd = await insert(store, clock, 6, 6, 6)
    await s.run_once()
    clock.set(T0 + 5 * SECOND)
    assert await s.run_once() == 2
    assert {await status(store, i) for i in small} == {ExecutionStatus.READY}
    clock.set(T0 + 6 * SECOND)
    assert await s.run_once() == 0
    assert {await status(store, i) for i in herd} == {ExecutionStatus.SCHEDULED}
    assert len(await store.execution_claim_ready("w", 9, LEASE, clock.now())) == 5


async def test_a_herd_is_not_armed_and_its_shards_open_before_its_entries_leave_the_wheel(
    store: Store,
) -> None:
    """Taking a herd's entries out of the wheel costs ~11 µs each: its shards open first, from
    the wheel's count of the instant, and the entries are taken out at the instant, not armed
    ahead (which would hold the opening back)."""
    clock = FakeClock(T0)
    s = wheel_scheduler(store, clock, leased=True, owner="a")
    s.direct_min = 3
    await s.run_once()
    ids = await insert(store, clock, 5, 5, 5)
    await s.run_once()
    clock.set(T0 + 5 * SECOND - ARM_LEAD / 2)
    assert s.arm(clock.now()) == 0  # a herd: not armed
    opened: list[set[int]] = []
    taken: list[int] = []
    real_open, real_take = s.store.shard_lease_open, s._take

    async def shard_lease_open(*args: Any, **kwargs: Any) -> list[int]:
        opened.append({lease.shard_id for lease in args[1]})
        assert not taken, "opened after the entries were taken out"
        return await real_open(*args, **kwargs)

    def take(due: Any) -> Any:
        taken.append(len(due))
        return real_take(due)

    s.store.shard_lease_open = shard_lease_open  # type: ignore[method-assign]
    s._take = take  # type: ignore[method-assign]
    clock.set(T0 + 5 * SECOND)
    assert await s.run_once() == 0
    shards = {(await store.execution_get("acme", i)).shard_id for i in ids}  # type: ignore[union-attr]
    assert set().union(*opened) == shards and taken == [3]
    assert len(await store.execution_claim_ready("w", 9, LEASE, clock.now())) == 3


async def test_an_unleased_scheduler_keeps_no_count_of_past_instants(store: Store) -> None:
    clock = FakeClock(T0)
    s = scheduler(store, clock)
    await insert(store, clock, 5, 6, 7)
    await s.run_once()
    assert s._instants.count(T0 + 5 * SECOND) == 1
    clock.set(T0 + 7 * SECOND)
    await s.run_once()
    assert [s._instants.count(T0 + n * SECOND) for n in (5, 6, 7)] == [0, 0, 0]


async def insert_as(
    store: Store, clock: FakeClock, delay: float, n: int, tenant: str, priority: int = 0
) -> list[uuid.UUID]:
    """``n`` executions of ``tenant`` at ``priority``, due ``delay`` seconds from now."""
    items = [
        new_execution(
            tenant,
            execute_in=delay,
            now=clock.now(),
            priority=priority,
            d=definition(),
            key=uuid.uuid4().hex,
        )
        for _ in range(n)
    ]
    return [o.execution.execution_id for o in await store.execution_insert_many(items)]


async def statuses(store: Store, tenant: str, ids: list[uuid.UUID]) -> set[ExecutionStatus]:
    found = [await store.execution_get(tenant, i) for i in ids]
    return {e.status for e in found if e is not None}


async def test_a_herd_of_two_tenants_is_promoted_and_claimed_by_turns(store: Store) -> None:
    """Opened, the claims would take its rows shard after shard, 9 of acme's to 1 of beta's for
    the whole drain (the fair claim takes no SCHEDULED row); promoted, each claim shares its
    batch between the two."""
    clock = FakeClock(T0)
    s = wheel_scheduler(store, clock, leased=True, owner="a")
    s.direct_min = 3
    await s.run_once()
    acme = await insert_as(store, clock, 5, 6, "acme")
    beta = await insert_as(store, clock, 5, 2, "beta")
    await s.run_once()
    clock.set(T0 + 5 * SECOND - ARM_LEAD / 2)
    assert s.arm(clock.now()) == 8  # not a herd to open: armed as any instant
    clock.set(T0 + 5 * SECOND)
    assert await s.run_once() == 8
    assert await statuses(store, "acme", acme) == {ExecutionStatus.READY}
    assert await statuses(store, "beta", beta) == {ExecutionStatus.READY}
    claimed = await store.execution_claim_ready("w", 4, LEASE, clock.now())
    assert sorted(e.tenant for e in claimed) == ["acme", "acme", "beta", "beta"]


async def test_a_herd_of_mixed_priorities_is_promoted_and_its_high_rows_start_first(
    store: Store,
) -> None:
    clock = FakeClock(T0)
    s = wheel_scheduler(store, clock, leased=True, owner="a")
    s.direct_min = 3
    await s.run_once()
    low = await insert_as(store, clock, 5, 8, "acme")
    high = await insert_as(store, clock, 5, 2, "acme", priority=5)
    await s.run_once()
    clock.set(T0 + 5 * SECOND)  # not armed: the round takes the instant's entries itself
    assert await s.run_once() == 10
    assert await statuses(store, "acme", low + high) == {ExecutionStatus.READY}
    claimed = await store.execution_claim_ready("w", 2, LEASE, clock.now())
    assert {e.execution_id for e in claimed} == set(high)


async def test_a_herd_of_one_tenant_and_one_priority_is_still_opened(store: Store) -> None:
    """The due window reads each row's tenant and priority; a herd that shares both, here not
    the defaults, is opened to the claims and none of it is promoted."""
    clock = FakeClock(T0)
    s = wheel_scheduler(store, clock, leased=True, owner="a")
    s.direct_min = 3
    await s.run_once()
    ids = await insert_as(store, clock, 5, 3, "beta", priority=5)
    pages = await store.execution_due_window(
        [DueSlice(shard, T0, T0 + 10 * SECOND) for shard in range(1024)], 10
    )
    rows = [row for page in pages for row in page]
    assert sorted(r.execution_id for r in rows) == sorted(ids)
    assert {(r.tenant, r.priority) for r in rows} == {("beta", 5)}
    await s.run_once()
    clock.set(T0 + 5 * SECOND - ARM_LEAD / 2)
    assert s.arm(clock.now()) == 0
    clock.set(T0 + 5 * SECOND)
    assert await s.run_once() == 0
    assert await statuses(store, "beta", ids) == {ExecutionStatus.SCHEDULED}
    claimed = await store.execution_claim_ready("w", 9, LEASE, clock.now())
    assert sorted(e.execution_id for e in claimed) == sorted(ids)


async def test_each_instant_is_judged_on_its_own_entries(store: Store) -> None:
    """An instant of two tenants is promoted; the next one, of one, is opened: the first's mix
    does not follow it."""
    clock = FakeClock(T0)
    s = wheel_scheduler(store, clock, leased=True, owner="a")
    s.direct_min = 3
    await s.run_once()
    mixed = await insert_as(store, clock, 5, 2, "acme")
    mixed += await insert_as(store, clock, 5, 1, "beta")
    herd = await insert_as(store, clock, 6, 3, "acme")
    await s.run_once()
    opened: list[int] = []
    real_open = s.store.shard_lease_open

    async def shard_lease_open(*args: Any, **kwargs: Any) -> list[int]:
        opened.extend(lease.shard_id for lease in args[1])
        return await real_open(*args, **kwargs)

    s.store.shard_lease_open = shard_lease_open  # type: ignore[method-assign]
    clock.set(T0 + 5 * SECOND)
    assert await s.run_once() == 3 and opened == []
    assert await statuses(store, "acme", mixed[:2]) == {ExecutionStatus.READY}
    clock.set(T0 + 6 * SECOND)
    assert await s.run_once() == 0
    assert await statuses(store, "acme", herd) == {ExecutionStatus.SCHEDULED}
    shards = {(await store.execution_get("acme", i)).shard_id for i in herd}  # type: ignore[union-attr]
    assert set(opened) == shards


async def test_a_late_round_opens_nothing_when_its_instants_differ(store: Store) -> None:
    """A round that comes after two instants, each of one tenant but not the same one: an open
    shard hands out all that is due in it, so both are promoted."""
    clock = FakeClock(T0)
    s = wheel_scheduler(store, clock, leased=True, owner="a")
    s.direct_min = 3
    await s.run_once()
    acme = await insert_as(store, clock, 5, 3, "acme")
    beta = await insert_as(store, clock, 6, 3, "beta")
    await s.run_once()
    clock.set(T0 + 6 * SECOND)
    assert await s.run_once() == 6
    assert await statuses(store, "acme", acme) == {ExecutionStatus.READY}
    assert await statuses(store, "beta", beta) == {ExecutionStatus.READY}
