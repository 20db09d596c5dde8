"""A large batch of new executions goes by binary COPY on PostgreSQL (store/postgres/
copy_insert.py) and must give each item the outcome the one-statement insert gives it: each
conformance test here runs on SQLite, and on PostgreSQL both ways (``path``);
tests/store/test_partitions_conformance.py runs them again on a partitioned table, where the key
trigger, not a unique index, refuses a key taken in between."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import uuid
from typing import Any

import pytest

from tests.factories import new_execution
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import NewExecution
from tickwheel.store.postgres import copy_insert
from tickwheel.store.postgres import store as pg_store
from tickwheel.store.postgres.rows import key_pairs, lock_order
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.protocol import Store


@pytest.fixture(params=["copy", "statement"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which way a PostgreSQL store inserts every batch of more than one item (SQLite has one)."""
    monkeypatch.setattr(pg_store, "COPY_FROM", 2 if request.param == "copy" else 10**9)
    return str(request.param)


def _key(name: str) -> str:
    """Keys unique to one test run: the session's database is shared between tests."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


async def _stored(store: Store, items: list[NewExecution]) -> int:
    return sum([await store.execution_get(i.tenant, i.execution_id) is not None for i in items])


def _count_copied_rows(monkeypatch: pytest.MonkeyPatch) -> list[NewExecution]:
    """The items the COPY path writes from now on (so that a test knows which way it went)."""
    copied: list[NewExecution] = []

    def copy_row(item: NewExecution) -> tuple[Any, ...]:
        copied.append(item)
        return real(item)

    real = copy_insert.copy_row
    monkeypatch.setattr(copy_insert, "copy_row", copy_row)
    return copied


async def test_a_mixed_batch_gives_each_item_the_statements_outcome(
    store: Store, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    held, b, a = _key("held"), _key("b"), _key("a")
    [first] = await store.execution_insert_many([new_execution(key=held)])
    copied = _count_copied_rows(monkeypatch)
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
    if path == "copy" and isinstance(store, PostgresStore):
        assert copied == [items[4], items[1], items[0], items[5]]  # in lock order
    else:
        assert copied == []
    # The keyed ones again: nothing created, each the execution it got the first time.
    keyed = [(i, o) for i, o in zip(items, outcomes, strict=True) if i.idempotency_key]
    again = await store.execution_insert_many(
        [dataclasses.replace(i, execution_id=uuid.uuid4()) for i, _ in keyed]
    )
    assert not any(o.created for o in again)
    assert [o.execution for o in again] == [o.execution for _, o in keyed]


async def test_a_key_taken_between_the_read_and_the_copy_stores_the_batch_once(
    store: Store, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not isinstance(store, PostgresStore):
        pytest.skip("PostgreSQL's COPY")
    raced = _key("raced")
    [theirs] = await store.execution_insert_many([new_execution(key=raced)])

    async def nothing_taken(*_: Any) -> dict[Any, Any]:
        return {}  # as if the competing submission committed just after the read

    monkeypatch.setattr(copy_insert, "_taken", nothing_taken)
    items = [new_execution(key=_key("new")), new_execution(key=raced), new_execution()]
    outcomes = await store.execution_insert_many(items)
    assert [o.created for o in outcomes] == [True, False, True]
    assert outcomes[1].execution == theirs.execution
    assert await _stored(store, items) == 2


async def test_concurrent_batches_sharing_keys_in_any_order_do_not_deadlock(
    store: Store, path: str
) -> None:
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
