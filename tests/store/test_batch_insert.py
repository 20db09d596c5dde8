"""A batch of submissions through the store's insert, on every backend (and again on a
partitioned table: tests/store/test_partitions_conformance.py): each item gets the outcome of its
own (created, or the execution that holds its key), whatever the batch shares or mixes. On
PostgreSQL the statement takes what every item has in common once (``rows.shared_columns``) and
each row's own values; a batch that shares nothing, or everything but its ids, must read back
as it was written."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta, timezone

from tests.factories import T0, new_execution
from tickwheel.domain.concurrency import Concurrency
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import NewExecution
from tickwheel.store.postgres.rows import key_pairs, lock_order, shared_columns
from tickwheel.store.protocol import Store

PLUS_TWO = timezone(timedelta(hours=2))


def _key(name: str) -> str:
    """Keys unique to one test run: the session's database is shared between tests."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


async def _stored(store: Store, items: list[NewExecution]) -> int:
    return sum([await store.execution_get(i.tenant, i.execution_id) is not None for i in items])


async def test_a_mixed_batch_gives_each_item_its_outcome(store: Store) -> None:
    held, b, a = _key("held"), _key("b"), _key("a")
    [first] = await store.execution_insert_many([new_execution(key=held)])
    items = [
        new_execution(key=b),
        new_execution(key=a, execute_in=30),  # SCHEDULED
        new_execution(key=held, inputs={"name": "Bob"}),  # a repeat of a stored one
        new_execution(key=b, inputs={"name": "Eve"}),  # a duplicate inside the batch
        new_execution(),  # no key
        new_execution("globex", key=held),  # the same key in another tenant
        new_execution(key=b),  # the same duplicate again
    ]
    outcomes = await store.execution_insert_many(items)
    assert [o.created for o in outcomes] == [True, True, False, False, True, True, False]
    assert outcomes[2].execution == first.execution
    assert outcomes[3].execution == outcomes[6].execution == outcomes[0].execution
    assert outcomes[3].execution.inputs == {"name": "Ada", "times": 1}  # the first item's
    assert outcomes[1].execution.status is ExecutionStatus.SCHEDULED
    for item, outcome in zip(items, outcomes, strict=True):
        if outcome.created:
            assert outcome.execution.execution_id == item.execution_id
            assert outcome.execution == await store.execution_get(item.tenant, item.execution_id)
    assert await _stored(store, items) == 4
    # The keyed ones again: nothing created, each the execution it got the first time.
    keyed = [(i, o) for i, o in zip(items, outcomes, strict=True) if i.idempotency_key]
    again = await store.execution_insert_many(
        [dataclasses.replace(i, execution_id=uuid.uuid4()) for i, _ in keyed]
    )
    assert not any(o.created for o in again)
    assert [o.execution for o in again] == [o.execution for _, o in keyed]


async def test_insert_or_existing_is_the_insert_without_records(store: Store) -> None:
    """``execution_insert_or_existing`` (a batch answered with ids): what
    ``execution_insert_many`` does, None for each item it inserted (stored as the item) and
    the execution holding the key of each it did not."""
    held, b = _key("held"), _key("b")
    [first] = await store.execution_insert_many([new_execution(key=held)])
    items = [
        new_execution(key=b),
        new_execution(key=_key("a"), execute_in=30),  # SCHEDULED
        new_execution(key=held, inputs={"name": "Bob"}),  # a stored one's key
        new_execution(key=b, inputs={"name": "Eve"}),  # a duplicate inside the batch
        new_execution(),  # no key
        new_execution("globex", key=held),  # the same key in another tenant
    ]
    found = await store.execution_insert_or_existing(items)
    assert [f is None for f in found] == [True, True, False, False, True, True]
    assert found[2] == first.execution
    own = await store.execution_get(items[0].tenant, items[0].execution_id)
    assert found[3] == own and own is not None and own.inputs == {"name": "Ada", "times": 1}
    for item, holder in zip(items, found, strict=True):
        stored = await store.execution_get(item.tenant, item.execution_id)
        assert (stored is not None) is (holder is None)
    assert await _stored(store, items) == 4
    again = [dataclasses.replace(i, execution_id=uuid.uuid4()) for i in items[:2]]
    assert await store.execution_insert_or_existing(again) == [
        await store.execution_get(i.tenant, i.execution_id) for i in items[:2]
    ]
    assert await store.execution_insert_or_existing([]) == []


async def _chunks(*chunks: list[NewExecution]) -> AsyncIterator[list[NewExecution]]:
    for chunk in chunks:
        yield chunk


async def test_a_batch_in_chunks_is_the_batch_in_one(store: Store) -> None:
    """``execution_insert_or_existing_chunks`` (one transaction, each chunk sent while the
    next is made) answers as ``execution_insert_or_existing`` does for such a batch: a key
    repeated in a later chunk (with the same and another body), a key stored before, an item
    without a key, the same key in another tenant; an empty chunk is nothing."""
    held = _key("held")
    [first] = await store.execution_insert_many([new_execution(key=held)])

    def batch() -> list[NewExecution]:
        a, b, c = _key("a"), _key("b"), _key("c")
        items = [
            new_execution(key=b),
            new_execution(key=held, inputs={"name": "Bob"}),
            new_execution(key=b, inputs={"name": "Eve"}),
            new_execution("globex", key=a),
            new_execution(key=a),
            new_execution(key=c, execute_in=30),  # SCHEDULED
            new_execution(),
            new_execution(key=b),
        ]
        # As the service sends them: in lock order (no key, a, b, b, b, c, held; globex's a).
        return sorted(items, key=lock_order)

    whole, chunked = batch(), batch()
    one = await store.execution_insert_or_existing(whole)
    by_chunks = await store.execution_insert_or_existing_chunks(
        _chunks(chunked[:3], [], chunked[3:4], chunked[4:7], chunked[7:])
    )
    created = [True, True, True, False, False, True, False, True]
    assert [h is None for h in one] == [h is None for h in by_chunks] == created
    for items, found in ((whole, one), (chunked, by_chunks)):
        assert [h and h.execution_id for h in found] == [None] * 3 + [
            items[2].execution_id,  # the first b of the batch, inserted in an earlier chunk
            items[2].execution_id,
            None,
            first.execution.execution_id,  # held before the batch
            None,
        ]
        for item, holder in zip(items, found, strict=True):
            stored = await store.execution_get(item.tenant, item.execution_id)
            assert (stored is not None) is (holder is None)
    assert await store.execution_insert_or_existing_chunks(_chunks()) == []
    assert await store.execution_insert_or_existing_chunks(_chunks([], [])) == []


async def test_a_batch_that_shares_nothing_reads_back_as_written(store: Store) -> None:
    trace = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    items = [
        new_execution(key=_key("x"), inputs={"name": "Ada", "times": 2}, priority=5),
        dataclasses.replace(
            new_execution("globex", now=T0.astimezone(PLUS_TWO), execute_in=90.5),
            max_attempts=7,
            trace_context=trace,
            start_by=T0 + timedelta(minutes=5),
            deadline=T0 + timedelta(hours=1),
            concurrency=Concurrency("k", 3, "fifo"),
        ),
        dataclasses.replace(new_execution(key=_key("y"), priority=-2), definition_version=2),
    ]
    outcomes = await store.execution_insert_many(items)
    assert all(o.created for o in outcomes)
    for item, outcome in zip(items, outcomes, strict=True):
        stored = await store.execution_get(item.tenant, item.execution_id)
        assert stored == outcome.execution
        assert stored is not None and stored.priority == item.priority
    second = await store.execution_get("globex", items[1].execution_id)
    assert second is not None and second.trace_context == trace
    assert second.concurrency == Concurrency("k", 3, "fifo") and second.max_attempts == 7


async def test_a_batch_that_shares_all_but_its_ids_reads_back_as_written(store: Store) -> None:
    base = new_execution(inputs={"name": "Ada"}, execute_in=45)
    items = [dataclasses.replace(base, execution_id=uuid.uuid4()) for _ in range(5)]
    outcomes = await store.execution_insert_many(items)
    assert all(o.created for o in outcomes)
    for item, outcome in zip(items, outcomes, strict=True):
        assert await store.execution_get(item.tenant, item.execution_id) == outcome.execution
        assert outcome.execution.status is ExecutionStatus.SCHEDULED


async def test_values_python_holds_equal_but_json_does_not_are_each_stored_as_given(
    store: Store,
) -> None:
    # 1 == 1.0 == True in Python: a batch must not store the first of them for every item.
    base = new_execution()
    for given in (
        [{"n": 1}, {"n": True}, {"n": 1.0}],
        [{"n": [1, {"m": 0}]}, {"n": [True, {"m": False}]}],
    ):
        items = [
            dataclasses.replace(
                base, execution_id=uuid.uuid4(), idempotency_key=_key("t"), inputs=inputs
            )
            for inputs in given
        ]
        assert all(o.created for o in await store.execution_insert_many(items))
        for item, inputs in zip(items, given, strict=True):
            stored = await store.execution_get(item.tenant, item.execution_id)
            assert stored is not None
            assert json.dumps(stored.inputs) == json.dumps(inputs)


async def test_concurrent_batches_sharing_keys_in_any_order_do_not_deadlock(store: Store) -> None:
    for round_ in range(3):
        keys = [_key(f"r{round_}-k{n}") for n in range(40)]
        batches = [[new_execution(key=k) for k in random.sample(keys, 40)] for _ in range(6)]
        results = await asyncio.gather(*(store.execution_insert_many(b) for b in batches))
        assert sum(o.created for outcomes in results for o in outcomes) == len(keys)
        by_key = {o.execution.idempotency_key: o.execution for o in results[0]}
        for batch, outcomes in zip(batches, results, strict=True):
            assert [o.execution for o in outcomes] == [by_key[i.idempotency_key] for i in batch]


def test_the_lock_order_is_by_tenant_then_key_in_code_point_order_and_stable() -> None:
    items = [
        new_execution("b", key="a"),
        new_execution("a", key="é"),
        new_execution("a", key="Z"),
        new_execution("a"),
        new_execution("a", key="Z"),
    ]
    assert sorted(items, key=lock_order) == [items[3], items[2], items[4], items[1], items[0]]
    assert key_pairs(items) == '[["b","a"],["a","\\u00e9"],["a","Z"]]'


def test_shared_columns_write_once_what_every_row_has_and_keep_a_row_per_item() -> None:
    rows = [["id1", "acme", None, 1, None], ["id2", "acme", None, 2, None]]
    assert shared_columns(rows) == {
        "items": '[["id1",null,null,1],["id2",null,null,2]]',
        "shared": '[null,"acme",null,null,null]',
    }
    # One row: nothing is shared (the statement reads it whole).
    assert shared_columns(rows[:1]) == {
        "items": '[["id1","acme",null,1,null]]',
        "shared": "[null,null,null,null,null]",
    }
    # The same item twice: everything is shared, and each still has its (empty) row.
    same = shared_columns([["id1", "acme"], ["id1", "acme"]])
    assert same == {"items": "[[null],[null]]", "shared": '["id1","acme"]'}


def test_the_insert_as_sent_fits_psycopgs_query_cache() -> None:
    """Over 4 kB psycopg converts a statement's placeholders again at every call (a single
    submission's client CPU): the store sends it without its comment lines."""
    from psycopg import _queries

    from tickwheel.store.postgres.rows import INSERT, INSERT_ONE

    for statement in (INSERT, INSERT_ONE):
        assert len(statement.encode()) < _queries.MAX_CACHED_STATEMENT_LENGTH
