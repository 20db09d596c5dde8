"""A herd's due SCHEDULED rows claimed in id order (docs/scaling.md, "The direct claim in id
order"), on both backends, on the fake clock. A store's first direct claim walks the open shards
(as before); from the rows it took the store learns a place in the herd (a tenant, an id), and
its next claims walk that tenant's SCHEDULED rows in id order from there, at most four times the
batch, then the open shards for what that walk left. The rows a claim may take are the direct
claim's whatever the order: due by an open shard's due_through, no limit, no pause, no rate
limit, SCHEDULED when locked.

The rows of these tests are all in one shard unless said otherwise, so that the walk of the
shards takes them by executeAt: each herd's executeAts are set against its ids, so that the
order a claim takes them in says which walk took them."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from tests.factories import T0, new_execution
from tests.store.test_concurrency import KEYED
from tests.store.test_direct_claims import DUE, LEASE, S, grants, status
from tickwheel.domain.models import Execution
from tickwheel.domain.rate_limits import RateLimitSpec
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import NewExecution, SubmitRequest, prepare_execution
from tickwheel.store.protocol import Store

MS = timedelta(milliseconds=1)
TICK = 100 * MS
"""The herds' rows are due TICKs before DUE, all after T0 (a row due by its submission is
inserted READY)."""


def row(before: timedelta, *, shard: int = 7, tenant: str = "acme") -> NewExecution:
    """An execution of greet due ``before`` ahead of DUE (a later id than any made before),
    SCHEDULED if that is after T0."""
    at = (DUE - before - T0).total_seconds()
    return replace(new_execution(tenant, execute_in=at), shard_id=shard)


def future(n: int, *, shard: int = 7, tenant: str = "acme") -> list[NewExecution]:
    """``n`` executions due an hour after DUE: SCHEDULED rows of the tenant no claim may take."""
    return [replace(new_execution(tenant, execute_in=3600), shard_id=shard) for _ in range(n)]


def ids(executions: list[Execution]) -> list[object]:
    return [e.execution_id for e in executions]


async def claim(store: Store, n: int) -> list[Execution]:
    return await store.execution_claim_ready("w", n, LEASE, DUE + S)


async def test_after_its_first_claim_a_store_takes_the_herd_in_id_order(store: Store) -> None:
    # Ids in this order; the walk of the shards would take them by executeAt: first, then the
    # rest from the last made to the second.
    first = row(10 * TICK)
    herd = [row(n * TICK) for n in range(1, 7)]
    await store.execution_insert_many([first, *herd])
    await store.shard_lease_open("s", await grants(store), DUE, DUE)
    assert ids(await claim(store, 1)) == [first.execution_id]  # the walk of the shards
    assert ids(await claim(store, 2)) == [i.execution_id for i in herd[:2]]  # then in id order
    assert ids(await claim(store, 3)) == [i.execution_id for i in herd[2:5]]
    # Tokens follow the claim order: ascending with the ids.
    [last] = await claim(store, 3)
    assert last.execution_id == herd[5].execution_id
    assert await claim(store, 3) == []


async def test_the_walk_passes_at_most_four_times_the_batch(store: Store) -> None:
    """Rows of the herd's tenant that are not due lie between the place and the next due rows:
    a claim of 1 walks 4 rows, finds none it may take, and the walk of the shards takes the
    rest by executeAt; a claim of 4 walks 16 and takes them in id order."""
    for batch, expected in ((1, ("late", "early")), (4, ("early", "late"))):
        start = row(10 * TICK)
        waiting = future(12)
        early, late = row(1 * TICK), row(2 * TICK)  # ids: early first; executeAt: late first
        await store.execution_insert_many([start, *waiting, early, late])
        await store.shard_lease_open("s", await grants(store), DUE, DUE)
        assert ids(await claim(store, 1)) == [start.execution_id]
        taken: list[object] = []
        while got := await claim(store, batch):
            taken += ids(got)
        named = {early.execution_id: "early", late.execution_id: "late"}
        assert tuple(named[i] for i in taken) == expected, batch
        for item in waiting:
            assert await status(store, item) is ExecutionStatus.SCHEDULED
            await store.execution_cancel("acme", item.execution_id, DUE)


async def test_rows_the_walk_left_behind_are_taken_by_the_walk_of_the_shards(
    store: Store,
) -> None:
    """Rows of a shard opened after the walk passed them (the scheduler opens an instant's first
    eight shards, then the rest) lie behind the place: the walk of the shards takes them."""
    herd = [row((9 - n) * TICK, shard=7 + n % 2) for n in range(8)]  # shards 7, 8, 7, 8, ...
    await store.execution_insert_many(herd)
    leases = await grants(store)
    seven = [g for g in leases if g.shard_id == 7]
    await store.shard_lease_open("s", seven, DUE, DUE)
    taken = ids(await claim(store, 2)) + ids(await claim(store, 2))
    assert taken == [herd[n].execution_id for n in (0, 2, 4, 6)]
    # Shard 8 opened now: its rows are all behind the place, and taken all the same.
    await store.shard_lease_open("s", [g for g in leases if g.shard_id == 8], DUE, DUE)
    rest = ids(await claim(store, 10))
    assert sorted(map(str, rest)) == sorted(str(herd[n].execution_id) for n in (1, 3, 5, 7))
    assert await claim(store, 10) == []


async def test_the_walk_takes_no_row_of_a_shard_not_open_or_not_due_by_it(store: Store) -> None:
    start = row(10 * TICK)
    closed = row(3 * TICK, shard=8)
    short = row(2 * TICK, shard=9)  # its shard opened through less than its executeAt
    plain = row(1 * TICK)
    await store.execution_insert_many([start, closed, short, plain])
    leases = await grants(store)
    await store.shard_lease_open("s", [g for g in leases if g.shard_id == 7], DUE, DUE)
    await store.shard_lease_open("s", [g for g in leases if g.shard_id == 9], DUE - 3 * S, DUE)
    assert ids(await claim(store, 1)) == [start.execution_id]
    assert ids(await claim(store, 10)) == [plain.execution_id]
    assert await claim(store, 10) == []
    assert await status(store, closed) is ExecutionStatus.SCHEDULED
    assert await status(store, short) is ExecutionStatus.SCHEDULED


async def test_the_walk_takes_no_row_under_a_limit_a_pause_or_a_rate_limit(store: Store) -> None:
    """Those rows are the scheduler's to promote, to the claims that apply limits, pauses and
    buckets; the ordered walk passes them over as the walk of the shards does."""
    start = row(10 * TICK)
    request = SubmitRequest(
        definition_uri="registry://jobs/sync", inputs={"customer": "c1"}, execute_at=DUE - 4 * S
    )
    limited = replace(prepare_execution(request, KEYED, "acme", T0), shard_id=7)
    paused = replace(row(3 * TICK), definition_uri="registry://jobs/paused")
    rated = replace(row(2 * TICK), definition_uri="registry://jobs/rated")
    plain = row(1 * TICK)
    await store.execution_insert_many([start, limited, paused, rated, plain])
    await store.shard_lease_open("s", await grants(store), DUE, DUE)
    assert ids(await claim(store, 1)) == [start.execution_id]
    await store.pause_set("acme", "registry://jobs/paused", "maintenance", T0)
    await store.rate_limit_set("acme", "registry://jobs/rated", RateLimitSpec(1, 60.0), 1, T0)
    assert ids(await claim(store, 10)) == [plain.execution_id]
    assert await claim(store, 10) == []
    for item in (limited, paused, rated):
        assert await status(store, item) is ExecutionStatus.SCHEDULED


async def test_a_row_cancelled_or_promoted_after_the_place_is_taken_once_or_not_at_all(
    store: Store,
) -> None:
    start = row(10 * TICK)
    cancelled, promoted, plain = row(3 * TICK), row(2 * TICK), row(1 * TICK)
    await store.execution_insert_many([start, cancelled, promoted, plain])
    leases = await grants(store)
    await store.shard_lease_open("s", leases, DUE, DUE)
    assert ids(await claim(store, 1)) == [start.execution_id]
    assert await store.execution_cancel("acme", cancelled.execution_id, DUE) is not None
    moved = await store.execution_promote_ids_leased("s", leases, [promoted.execution_id], DUE)
    assert set(moved.moved) == {promoted.execution_id}
    # READY first (its ready_at is the promotion's), then the walk: each row once.
    got = await claim(store, 10)
    assert ids(got) == [promoted.execution_id, plain.execution_id]
    assert [e.attempt_count for e in got] == [1, 1]
    assert await claim(store, 10) == []
    assert await status(store, cancelled) is ExecutionStatus.CANCELLED
    assert len(await store.attempt_list("acme", promoted.execution_id)) == 1


async def test_another_tenants_rows_are_neither_walked_nor_taken(store: Store) -> None:
    """A tenant's rows between the herd's ids (here 20 between each two, SCHEDULED, an hour
    ahead, or due in a shard not open) cost the herd's walk nothing: a claim of 1 walks 4 rows,
    and still takes the herd in id order."""
    start = row(10 * TICK)
    items: list[NewExecution] = [start]
    herd: list[NewExecution] = []
    hostile: list[NewExecution] = []
    for n in range(1, 6):
        hostile += [*future(20, tenant="evil"), row(n * MS, shard=8, tenant="evil")]
        herd.append(row(n * TICK))
        items += [*hostile[-21:], herd[-1]]
    await store.execution_insert_many(items)
    leases = await grants(store)
    await store.shard_lease_open("s", [g for g in leases if g.shard_id == 7], DUE, DUE)
    assert ids(await claim(store, 1)) == [start.execution_id]
    taken: list[object] = []
    while got := await claim(store, 1):
        taken += ids(got)
    assert taken == [i.execution_id for i in herd]
    for item in hostile:
        assert await status(store, item, "evil") is ExecutionStatus.SCHEDULED


async def test_a_place_learnt_from_another_tenants_row_goes_to_the_herds_tenant(
    store: Store,
) -> None:
    """An open shard may hold another tenant's due row (due since the instant's judgement): the
    walk of the shards takes it with the herd's, and the place goes to the tenant most of the
    rows it took belong to."""
    stray = row(20 * TICK, tenant="evil")
    start = [row(10 * TICK), row(9 * TICK)]
    herd = [row(n * TICK) for n in range(1, 4)]
    await store.execution_insert_many([*start, stray, *herd])
    await store.shard_lease_open("s", await grants(store), DUE, DUE)
    first = await claim(store, 3)
    assert set(ids(first)) == {stray.execution_id, *(i.execution_id for i in start)}
    assert ids(await claim(store, 3)) == [i.execution_id for i in herd]


async def test_a_closed_herd_forgets_its_place(store: Store) -> None:
    """Once a claim sees no shard open the store forgets its place: the next herd's first claim
    walks the shards again (here it takes the row due first, the last made), not the herd in
    id order from the old place."""
    first = [row(10 * TICK), row(9 * TICK)]
    await store.execution_insert_many(first)
    leases = await grants(store)
    await store.shard_lease_open("s", leases, DUE, DUE)
    assert ids(await claim(store, 1)) == [first[0].execution_id]
    assert ids(await claim(store, 5)) == [first[1].execution_id]  # in id order
    _, closed = await store.shard_lease_grace("s", leases, DUE, DUE + S)
    assert 7 in closed
    assert await claim(store, 5) == []  # nothing open
    later = DUE + 10 * S
    herd = [row(-n * TICK) for n in (9, 8, 7)]  # ids ascending, due DUE + 0.9, 0.8, 0.7 s
    await store.execution_insert_many(herd)
    await store.shard_lease_open("s", leases, later, later)
    [got] = await store.execution_claim_ready("w", 1, LEASE, later)
    assert got.execution_id == herd[2].execution_id
    rest = await store.execution_claim_ready("w", 5, LEASE, later)
    assert ids(rest) == [herd[1].execution_id, herd[0].execution_id]
