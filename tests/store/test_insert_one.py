"""``execution_insert_one``, a single submission's own path into the store, gives what the
batch's path gives for the same item: the same row and outcome, the same answer to a repeat
and to a key already used for another request, and the same rate-limit bookkeeping around it
(``rate_limit_synced``). On PostgreSQL ``execution_insert_many`` of one item takes it too, so
the lane's tests (test_submit_lane*.py) and the wake-ups' (test_submit_wakeups.py) cover its
connection and notifications; a batch of two is the batch's path."""

from __future__ import annotations

import dataclasses
from datetime import timedelta, timezone
from typing import Any

import pytest

from tests.factories import T0, definition, new_execution
from tickwheel.domain.ids import uuid7
from tickwheel.domain.rate_limits import RateLimitSpec
from tickwheel.domain.submission import NewExecution, SubmitRequest, prepare_execution
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.protocol import Store

PLUS_TWO = timezone(timedelta(hours=2))
NOW = T0.astimezone(PLUS_TWO)  # an offset that the stored row does not keep


def _items(tenant: str) -> list[NewExecution]:
    """Each kind of item a single submission makes: every optional column set (a concurrency
    group, a trace context, limits, a key that is not ASCII), due later, due now with a key,
    and without one."""
    limited = definition(concurrency={"key": "${{ inputs.name }}", "limit": 2, "order": "none"})
    trace = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    full = SubmitRequest(
        definition_uri="registry://jobs/greet",
        inputs={"name": "Zoë", "times": 3},
        execute_at=NOW + timedelta(minutes=3),
        priority=-7,
        idempotency_key="clé-1",
        start_by=NOW + timedelta(hours=1),
        deadline=NOW + timedelta(hours=2),
    )
    return [
        prepare_execution(full, limited, tenant, NOW, trace),
        new_execution(tenant, key="later", now=NOW, execute_in=90.5),
        new_execution(tenant, key="plain", now=NOW),
        new_execution(tenant, now=NOW),
    ]


def _row(item: Any) -> dict[str, Any]:
    """What two twins (items of two tenants made alike) share: all but their tenant and id,
    and the shard their id decides."""
    return {k: v for k, v in vars(item).items() if k not in ("tenant", "execution_id", "shard_id")}


async def test_one_item_is_stored_and_answered_as_in_a_batch(store: Store) -> None:
    filler = new_execution("other", key="filler", now=NOW)  # a batch of two: the batch's path
    for one, twin in zip(_items("acme"), _items("globex"), strict=True):
        alone = await store.execution_insert_one(one)
        [batched, _] = await store.execution_insert_many(
            [twin, dataclasses.replace(filler, execution_id=uuid7(NOW))]
        )
        assert alone.created and batched.created
        assert alone.execution.execution_id == one.execution_id
        assert _row(alone.execution) == _row(batched.execution)
        assert vars(alone.execution).keys() == vars(batched.execution).keys()
        assert alone.execution == await store.execution_get("acme", one.execution_id)
        assert batched.execution == await store.execution_get("globex", twin.execution_id)
        filler = dataclasses.replace(filler, idempotency_key=f"filler-{one.execution_id}")


async def test_a_repeat_and_a_reused_key_find_what_a_batch_finds(store: Store) -> None:
    first = new_execution(key="k", now=NOW)
    assert (await store.execution_insert_one(first)).created
    # The same request again (another id, as another API node makes it): the stored one.
    again = dataclasses.replace(first, execution_id=uuid7(NOW))
    alone = await store.execution_insert_one(again)
    [batched, _] = await store.execution_insert_many(
        [dataclasses.replace(first, execution_id=uuid7(NOW)), new_execution(key="k2", now=NOW)]
    )
    stored = await store.execution_get("acme", first.execution_id)
    assert not alone.created and not batched.created
    assert alone.execution == batched.execution == stored
    # Another request under the key: the holder comes back (the service makes it a Conflict).
    other = new_execution(key="k", now=NOW, inputs={"name": "Grace"})
    assert other.request_fingerprint != first.request_fingerprint
    held = await store.execution_insert_one(other)
    assert not held.created and held.execution == stored


async def test_a_key_a_parameter_cannot_hold_is_refused_as_in_a_batch(store: Store) -> None:
    """A NUL or a lone surrogate cannot go as a text parameter: the item goes as a batch's
    JSON row, which the server refuses as it always did (``one_params``)."""
    if not isinstance(store, PostgresStore):
        pytest.skip("SQLite stores such text as it is")
    for bad in ("a\x00b", "a\ud800b"):
        with pytest.raises(Exception) as alone:
            await store.execution_insert_one(new_execution(key=bad, now=NOW))
        with pytest.raises(Exception) as batched:
            await store.execution_insert_many(
                [new_execution(key=bad, now=NOW), new_execution(key="fine", now=NOW)]
            )
        assert type(alone.value) is type(batched.value)
    assert await store.execution_insert_one(new_execution(key="after", now=NOW))


async def test_a_rate_limit_is_synced_once_and_said_so(store: Store) -> None:
    uri = "registry://jobs/greet"
    assert not store.rate_limit_synced("acme", uri, 1)
    await store.rate_limit_sync("acme", uri, 1, RateLimitSpec(5, 1.0))
    assert store.rate_limit_synced("acme", uri, 1)
    assert not store.rate_limit_synced("acme", uri, 2)
    assert not store.rate_limit_synced("globex", uri, 1)
