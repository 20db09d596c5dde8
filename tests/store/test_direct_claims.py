"""Due SCHEDULED rows claimed as they are (docs/scaling.md, "Claiming a herd without promoting
it"), on both backends, on the fake clock: a shard's lease holder opens it through an instant
(fenced by its epoch, never past the clock), the plain claim then takes its due rows straight to
RUNNING, the promotion of an opened instant leaves exactly those rows to the claims, and a shard
closes once nothing due is left in it."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from tests.factories import T0, new_execution
from tests.store.test_concurrency import KEYED
from tickwheel.domain.models import ShardLease
from tickwheel.domain.rate_limits import RateLimitSpec
from tickwheel.domain.sharding import SHARD_COUNT
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.domain.submission import NewExecution, SubmitRequest, prepare_execution
from tickwheel.store.protocol import Store

S = timedelta(seconds=1)
TTL = 60 * S
LEASE = timedelta(seconds=30)
GREET = "registry://jobs/greet"
DUE = T0 + 5 * S


def due(n: int = 1, *, shard: int = 7, at: timedelta = 5 * S) -> list[NewExecution]:
    """``n`` executions of greet due at T0 + ``at``, all in ``shard``."""
    return [replace(new_execution(execute_in=at.total_seconds()), shard_id=shard) for _ in range(n)]


async def grants(store: Store, owner: str = "s") -> list[ShardLease]:
    return await store.shard_lease_acquire(owner, SHARD_COUNT, TTL, T0)


async def closes(
    store: Store, owner: str, leases: list[ShardLease], through: datetime, now: datetime
) -> list[int]:
    """The shards a grace check of ``leases`` through ``through`` closes (its count aside)."""
    _, closed = await store.shard_lease_grace(owner, leases, through, now)
    return closed


async def status(store: Store, item: NewExecution, tenant: str = "acme") -> ExecutionStatus:
    got = await store.execution_get(tenant, item.execution_id)
    assert got is not None
    return got.status


async def test_a_claim_takes_a_due_row_of_an_open_shard_straight_to_running(store: Store) -> None:
    [item] = due()
    [later] = due(at=9 * S)
    await store.execution_insert_many([item, later])
    leases = await grants(store)
    # Closed: the row is due, but nothing claims a SCHEDULED row before its shard opens.
    assert await store.execution_claim_ready("w", 10, LEASE, DUE + S) == []
    assert await store.shard_lease_open("s", leases, DUE, DUE) == list(range(SHARD_COUNT))
    [claimed] = await store.execution_claim_ready("w", 10, LEASE, DUE + S)
    assert claimed.execution_id == item.execution_id
    assert claimed.status is ExecutionStatus.RUNNING
    assert claimed.ready_at == item.execute_at  # it was claimable from its instant
    assert claimed.fencing_token is not None and claimed.attempt_count == 1
    [attempt] = await store.attempt_list("acme", item.execution_id)
    assert (attempt.status, attempt.fencing_token) == (AttemptStatus.RUNNING, claimed.fencing_token)
    # Due after the instant the shard was opened through: not claimed.
    assert await store.execution_claim_ready("w", 10, LEASE, DUE + 10 * S) == []
    assert await status(store, later) is ExecutionStatus.SCHEDULED


async def test_ready_rows_come_first_and_direct_rows_fill_the_batch(store: Store) -> None:
    ready = new_execution(priority=0)  # already due at submission: READY
    scheduled = due(3)
    await store.execution_insert_many([ready, *scheduled])
    await store.shard_lease_open("s", await grants(store), DUE, DUE)
    first = await store.execution_claim_ready("w", 2, LEASE, DUE + S)
    assert first[0].execution_id == ready.execution_id
    assert first[1].execution_id in {i.execution_id for i in scheduled}
    tokens = [e.fencing_token or 0 for e in first]
    assert tokens == sorted(tokens)
    rest = await store.execution_claim_ready("w", 10, LEASE, DUE + S)
    assert len(rest) == 2 and min(e.fencing_token or 0 for e in rest) > max(tokens)


async def test_a_stale_holders_opening_changes_nothing(store: Store) -> None:
    [item] = due()
    await store.execution_insert_many([item])
    old = await grants(store, "a")
    # a's grants expired and b took the shards over (new epochs): a's opening is refused.
    await store.shard_lease_acquire("b", SHARD_COUNT, TTL, T0 + TTL)
    assert await store.shard_lease_open("a", old, DUE + TTL, T0 + TTL) == []
    assert await store.execution_claim_ready("w", 10, LEASE, T0 + TTL + S) == []
    assert await status(store, item) is ExecutionStatus.SCHEDULED


async def test_an_opening_never_reaches_past_the_clock(store: Store) -> None:
    [item] = due()
    await store.execution_insert_many([item])
    leases = await grants(store)
    # A scheduler whose clock runs ahead asks for DUE while the database's clock says DUE - 1 s.
    await store.shard_lease_open("s", leases, DUE, DUE - S)
    assert await store.execution_claim_ready("w", 10, LEASE, DUE + S) == []
    # An opening never goes backwards either; at DUE it reaches the row.
    await store.shard_lease_open("s", leases, DUE - 2 * S, DUE)
    assert await store.execution_claim_ready("w", 10, LEASE, DUE + S) == []
    await store.shard_lease_open("s", leases, DUE, DUE)
    assert len(await store.execution_claim_ready("w", 10, LEASE, DUE + S)) == 1


async def test_the_direct_promotion_leaves_exactly_the_rows_the_claim_takes(store: Store) -> None:
    plain = due(2)
    request = SubmitRequest(
        definition_uri="registry://jobs/sync", inputs={"customer": "c1"}, execute_at=DUE
    )
    limited = replace(prepare_execution(request, KEYED, "acme", T0), shard_id=7)
    paused = replace(new_execution("globex", execute_in=5), shard_id=7)
    rated = replace(new_execution("initech", execute_in=5), shard_id=7)
    items = [*plain, limited, paused, rated]
    await store.execution_insert_many(items)
    await store.pause_set("globex", "", "maintenance", T0)
    await store.rate_limit_set("initech", GREET, RateLimitSpec(1, 60.0), 1, T0)
    leases = await grants(store)
    await store.shard_lease_open("s", leases, DUE, DUE)
    # Not a row under a concurrency limit, a pause or a rate limit: those wait for promotion,
    # and the claims that apply them.
    claimed = await store.execution_claim_ready("w", 10, LEASE, DUE)
    assert {e.execution_id for e in claimed} == {i.execution_id for i in plain}
    ids = [i.execution_id for i in items]
    promoted = await store.execution_promote_ids_leased("s", leases, ids, DUE, direct=True)
    assert set(promoted.moved) == {limited.execution_id, paused.execution_id, rated.execution_id}
    final = await store.execution_promote_ids_leased("s", leases, ids, DUE + S)
    assert final.moved == {}


async def test_rows_the_claims_leave_are_promoted_a_grace_later(store: Store) -> None:
    """With READY work of several tenants the claims share it out fairly, and that claim takes
    no SCHEDULED row: the promotion that follows the instant moves them, none is left behind."""
    plain = due(2)
    others = [new_execution("globex"), new_execution("initech")]  # READY at once
    await store.execution_insert_many([*plain, *others])
    leases = await grants(store)
    await store.shard_lease_open("s", leases, DUE, DUE)
    ids = [i.execution_id for i in plain]
    promoted = await store.execution_promote_ids_leased("s", leases, ids, DUE, direct=True)
    assert promoted.moved == {}
    claimed = await store.execution_claim_ready("w", 10, LEASE, DUE)
    assert {e.execution_id for e in claimed} == {i.execution_id for i in others}
    final = await store.execution_promote_ids_leased("s", leases, ids, DUE + S)
    assert set(final.moved) == set(ids)
    assert await closes(store, "s", leases, DUE, DUE + S) == list(range(SHARD_COUNT))


async def test_the_plain_claim_passes_over_rows_a_pause_holds(store: Store) -> None:
    [item] = due()
    await store.execution_insert_many([item])
    await store.pause_set("acme", GREET, "maintenance", T0)
    await store.shard_lease_open("s", await grants(store), DUE, DUE)
    assert await store.execution_claim_ready("w", 10, LEASE, DUE + S) == []
    await store.pause_clear("acme", GREET)
    assert len(await store.execution_claim_ready("w", 10, LEASE, DUE + S)) == 1


async def test_a_worker_naming_definitions_takes_only_their_rows(store: Store) -> None:
    [item] = due()
    await store.execution_insert_many([item])
    await store.shard_lease_open("s", await grants(store), DUE, DUE)
    other = ["registry://jobs/other"]
    assert await store.execution_claim_ready("w", 10, LEASE, DUE + S, other) == []
    [claimed] = await store.execution_claim_ready("w", 10, LEASE, DUE + S, [GREET])
    assert claimed.execution_id == item.execution_id


async def test_a_cancelled_row_is_not_claimed_and_a_claimed_one_is_not_cancelled(
    store: Store,
) -> None:
    first, second = due(2)
    await store.execution_insert_many([first, second])
    await store.shard_lease_open("s", await grants(store), DUE, DUE)
    assert await store.execution_cancel("acme", first.execution_id, DUE) is not None
    [claimed] = await store.execution_claim_ready("w", 10, LEASE, DUE + S)
    assert claimed.execution_id == second.execution_id
    assert await status(store, first) is ExecutionStatus.CANCELLED
    # RUNNING now: a cancel does not end it (it asks its worker to stop).
    await store.execution_cancel("acme", second.execution_id, DUE + S)
    assert await status(store, second) is ExecutionStatus.RUNNING


async def test_a_shard_closes_once_nothing_due_is_left_and_not_before(store: Store) -> None:
    [item] = due()
    [other] = due(shard=8)
    await store.execution_insert_many([item, other])
    leases = await grants(store)
    mine = [g for g in leases if g.shard_id in (7, 8)]
    await store.shard_lease_open("s", mine, DUE, DUE)
    # Shard 7 still holds a due row; shard 8's row was promoted: only 8 closes.
    await store.execution_promote_ids_leased("s", mine, [other.execution_id], DUE)
    assert await closes(store, "s", mine, DUE, DUE) == [8]
    # Opened again later (a new instant): an older instant's close leaves it open.
    await store.shard_lease_open("s", mine, DUE + S, DUE + S)
    await store.execution_promote_ids_leased("s", mine, [item.execution_id], DUE + S)
    assert await closes(store, "s", mine, DUE, DUE + S) == []
    assert await closes(store, "s", mine, DUE + S, DUE + S) == [7, 8]
    # Closed: a row due since is not claimed as it is.
    [late] = due()
    await store.execution_insert_many([late])
    claimed = await store.execution_claim_ready("w", 10, LEASE, DUE + 2 * S)
    assert {e.execution_id for e in claimed} == {item.execution_id, other.execution_id}  # READY
    assert await status(store, late) is ExecutionStatus.SCHEDULED


async def test_an_emptied_shard_closes_while_another_is_still_drained(store: Store) -> None:
    """The scheduler asks at every grace of a herd (docs/scaling.md, "Emptied shards closed at
    every grace"): a shard the claims emptied closes, one they are still draining stays open
    and its rows are still taken as they are."""
    emptied = due(2)
    drained = [replace(i, shard_id=8) for i in due(2)]
    other = "registry://jobs/other"
    drained = [replace(i, definition_uri=other) for i in drained]
    await store.execution_insert_many([*emptied, *drained])
    leases = await grants(store)
    mine = [g for g in leases if g.shard_id in (7, 8)]
    await store.shard_lease_open("s", mine, DUE, DUE)
    assert len(await store.execution_claim_ready("w", 10, LEASE, DUE, [GREET])) == 2
    assert len(await store.execution_claim_ready("w", 1, LEASE, DUE, [other])) == 1
    assert await closes(store, "s", mine, DUE, DUE) == [7]
    [late] = due()
    await store.execution_insert_many([late])
    assert await store.execution_claim_ready("w", 10, LEASE, DUE + S, [GREET]) == []
    assert await status(store, late) is ExecutionStatus.SCHEDULED
    [taken] = await store.execution_claim_ready("w", 10, LEASE, DUE + S, [other])
    assert taken.status is ExecutionStatus.RUNNING and taken.ready_at == DUE
    assert await closes(store, "s", mine, DUE, DUE + S) == [8]


async def test_a_shard_the_clock_opened_short_keeps_rows_due_by_the_instant_open(
    store: Store,
) -> None:
    """Opened through less than the instant (the database's clock behind the scheduler's), a
    shard still holding a row due by the instant stays open: a closed shard holds nothing due
    by the instant, so the scheduler's count of a herd skips the shards it closed."""
    [item] = due()
    await store.execution_insert_many([item])
    leases = await grants(store)
    await store.shard_lease_open("s", leases, DUE, DUE - S)  # through DUE - 1 s
    assert 7 not in await closes(store, "s", leases, DUE, DUE)
    await store.execution_promote_ids_leased("s", leases, [item.execution_id], DUE)
    assert await closes(store, "s", leases, DUE, DUE) == [7]


async def test_a_stale_holder_closes_nothing(store: Store) -> None:
    [item] = due()
    await store.execution_insert_many([item])
    old = await grants(store, "a")
    assert await store.shard_lease_open("s", old, DUE, DUE) == []  # not s's grants
    await store.shard_lease_open("a", old, DUE, DUE)
    await store.execution_cancel("acme", item.execution_id, DUE)
    new = await store.shard_lease_acquire("b", SHARD_COUNT, TTL, T0 + TTL)
    assert await closes(store, "a", old, DUE, T0 + TTL) == []
    assert 7 in await closes(store, "b", new, DUE, T0 + TTL)


async def test_the_catch_all_closes_an_open_shard_with_nothing_due(store: Store) -> None:
    """The claims took every due row of an opened shard: nothing is due, but the shard is open,
    so the catch-all still runs and closes it (its idle rounds skip only when none is open)."""
    await store.execution_insert_many(due(2))
    leases = await grants(store)
    await store.shard_lease_open("s", leases, DUE, DUE)
    assert len(await store.execution_claim_ready("w", 10, LEASE, DUE)) == 2
    swept = await store.execution_promote_due_leased("s", leases, 100, DUE + S)
    assert (swept.promoted, swept.fenced) == (0, [])
    [late] = due()
    await store.execution_insert_many([late])
    assert await store.execution_claim_ready("w", 10, LEASE, DUE + 2 * S) == []
    assert await status(store, late) is ExecutionStatus.SCHEDULED


async def test_the_catch_all_promotes_what_is_left_and_closes_the_shard(store: Store) -> None:
    """A scheduler that opened a shard and died: its successor's catch-all over the shard (the
    rescan of a takeover) promotes the rows the claims left, and the shard closes."""
    items = due(3)
    await store.execution_insert_many(items)
    old = await grants(store, "a")
    await store.shard_lease_open("a", old, DUE, DUE)
    assert len(await store.execution_claim_ready("w", 1, LEASE, DUE + S)) == 1
    new = await store.shard_lease_acquire("b", SHARD_COUNT, TTL, T0 + TTL)
    swept = await store.execution_promote_due_leased("b", new, 100, T0 + TTL)
    assert swept.promoted == 2
    [row] = due()
    await store.execution_insert_many([row])
    # Closed: the READY rows are claimed; the new row, due, waits for its promotion.
    claimed = await store.execution_claim_ready("w", 10, LEASE, T0 + TTL)
    assert {e.execution_id for e in claimed} == set(swept.moved)
    assert await status(store, row) is ExecutionStatus.SCHEDULED
