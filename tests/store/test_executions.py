"""Conformance tests of the execution store: each runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import timedelta

from tests.factories import T0, new_execution
from tickwheel.domain.models import ExecutionEventKind, ExecutionFilter
from tickwheel.domain.states import ExecutionStatus
from tickwheel.store.protocol import Store


async def test_insert_due_now_is_ready_and_future_is_scheduled(store: Store) -> None:
    now_item = new_execution()
    later_item = new_execution(execute_in=60)
    outcomes = await store.execution_insert_many([now_item, later_item])
    assert [o.created for o in outcomes] == [True, True]
    assert outcomes[0].execution.status is ExecutionStatus.READY
    assert outcomes[0].execution.ready_at == T0
    assert outcomes[1].execution.status is ExecutionStatus.SCHEDULED
    assert outcomes[1].execution.ready_at is None
    got = await store.execution_get("acme", later_item.execution_id)
    assert got == outcomes[1].execution
    assert got is not None
    assert got.execute_at == T0 + timedelta(seconds=60)
    assert got.bucket_start == T0 + timedelta(minutes=1)
    assert got.inputs == {"name": "Ada", "times": 1}
    assert got.max_attempts == 4
    assert 0 <= got.shard_id < 1024


async def test_same_key_returns_the_existing_execution(store: Store) -> None:
    first = new_execution(key="k-1")
    [a] = await store.execution_insert_many([first])
    [b] = await store.execution_insert_many([new_execution(key="k-1", inputs={"name": "Bob"})])
    assert a.created and not b.created
    assert b.execution.execution_id == first.execution_id
    assert b.execution.inputs == {"name": "Ada", "times": 1}


async def test_keys_are_per_tenant(store: Store) -> None:
    [a] = await store.execution_insert_many([new_execution("acme", key="k")])
    [b] = await store.execution_insert_many([new_execution("globex", key="k")])
    assert a.created and b.created
    assert await store.execution_get("globex", a.execution.execution_id) is None


async def test_duplicate_keys_inside_one_batch_create_one(store: Store) -> None:
    outcomes = await store.execution_insert_many(
        [new_execution(key="dup"), new_execution(key="dup"), new_execution()]
    )
    assert [o.created for o in outcomes] == [True, False, True]
    assert outcomes[0].execution.execution_id == outcomes[1].execution.execution_id


async def test_list_is_newest_first_with_keyset_paging_and_filters(store: Store) -> None:
    items = [new_execution(execute_in=i * 60 if i % 2 else None, now=T0) for i in range(7)]
    await store.execution_insert_many(items)
    ids = sorted((i.execution_id for i in items), reverse=True)
    page1 = await store.execution_list("acme", ExecutionFilter(), None, 3)
    assert [e.execution_id for e in page1] == ids[:3]
    page2 = await store.execution_list("acme", ExecutionFilter(), page1[-1].execution_id, 3)
    assert [e.execution_id for e in page2] == ids[3:6]
    scheduled = await store.execution_list(
        "acme", ExecutionFilter(statuses=(ExecutionStatus.SCHEDULED,)), None, 100
    )
    assert len(scheduled) == 3
    assert all(e.status is ExecutionStatus.SCHEDULED for e in scheduled)
    window = await store.execution_list(
        "acme",
        ExecutionFilter(
            execute_from=T0 + timedelta(seconds=60), execute_to=T0 + timedelta(minutes=4)
        ),
        None,
        100,
    )
    assert sorted(e.execute_at for e in window) == [
        T0 + timedelta(minutes=1),
        T0 + timedelta(minutes=3),
    ]
    assert await store.execution_list("globex", ExecutionFilter(), None, 100) == []
    by_def = ExecutionFilter(definition_uri="registry://jobs/other")
    assert await store.execution_list("acme", by_def, None, 100) == []


async def test_list_pages_newest_first_across_statuses_and_filters(store: Store) -> None:
    """Rows of every status interleaved by id: a page is the newest across all of them (or
    across the statuses asked for), and keyset paging walks each exactly once. (PostgreSQL reads
    one ordered page per status and merges them, migration 0021.)"""
    items = [
        new_execution(key=f"k{i}", execute_in=None if i % 3 else 600, now=T0) for i in range(12)
    ]
    await store.execution_insert_many(items)
    claimed = await store.execution_claim_ready("w1", 3, timedelta(seconds=30), T0)
    cancelled = [i for i in items if i.execution_id not in {c.execution_id for c in claimed}][:2]
    for item in cancelled:
        assert await store.execution_cancel("acme", item.execution_id, T0) is not None
    everything = await store.execution_list("acme", ExecutionFilter(), None, 100)
    assert {e.status for e in everything} == {
        ExecutionStatus.SCHEDULED,
        ExecutionStatus.READY,
        ExecutionStatus.RUNNING,
        ExecutionStatus.CANCELLED,
    }
    ids = sorted((i.execution_id for i in items), reverse=True)
    assert [e.execution_id for e in everything] == ids

    async def walk(flt: ExecutionFilter, size: int) -> list[uuid.UUID]:
        seen: list[uuid.UUID] = []
        before = None
        while page := await store.execution_list("acme", flt, before, size):
            assert len(page) <= size
            seen += [e.execution_id for e in page]
            before = page[-1].execution_id
        return seen

    assert await walk(ExecutionFilter(), 5) == ids
    two = (ExecutionStatus.RUNNING, ExecutionStatus.SCHEDULED)
    wanted = [e.execution_id for e in everything if e.status in two]
    assert await walk(ExecutionFilter(statuses=two), 2) == wanted
    assert await walk(ExecutionFilter(statuses=tuple(reversed(two))), 3) == wanted
    by_key = ExecutionFilter(statuses=two, idempotency_key_prefix="k1")  # k1, k10, k11
    assert await walk(by_key, 1) == [
        e.execution_id
        for e in everything
        if e.status in two and e.idempotency_key in {"k1", "k10", "k11"}
    ]
    exact = await store.execution_list("acme", ExecutionFilter(idempotency_key="k4"), None, 9)
    assert [e.execution_id for e in exact] == [items[4].execution_id]
    by_def = ExecutionFilter(definition_uri=items[0].definition_uri, statuses=two)
    assert await walk(by_def, 2) == wanted
    assert await walk(ExecutionFilter(statuses=(ExecutionStatus.FAILED,)), 4) == []


async def test_cancel_is_guarded_by_status(store: Store) -> None:
    item = new_execution(execute_in=30)
    await store.execution_insert_many([item])
    later = T0 + timedelta(seconds=5)
    cancelled = await store.execution_cancel("acme", item.execution_id, later)
    assert cancelled is not None
    assert cancelled.status is ExecutionStatus.CANCELLED
    assert cancelled.finished_at == later
    assert await store.execution_cancel("acme", item.execution_id, later) is None
    events = await store.execution_event_list("acme", item.execution_id)
    assert [e.kind for e in events] == [ExecutionEventKind.CANCELLED]
    assert events[0].detail["fromStatus"] == "SCHEDULED"


async def test_cancel_of_another_tenants_execution_matches_nothing(store: Store) -> None:
    item = new_execution("acme")
    await store.execution_insert_many([item])
    assert await store.execution_cancel("globex", item.execution_id, T0) is None
    got = await store.execution_get("acme", item.execution_id)
    assert got is not None and got.status is ExecutionStatus.READY


async def test_replay_only_moves_failed(store: Store) -> None:
    item = new_execution()
    await store.execution_insert_many([item])
    assert await store.execution_replay("acme", item.execution_id, 4, T0) is None


async def test_unknown_execution_is_none(store: Store) -> None:
    assert await store.execution_get("acme", uuid.uuid4()) is None
    assert await store.attempt_list("acme", uuid.uuid4()) == []
