"""The execution rules as a service, on both backends: what a submission did comes back as a
typed outcome (created / same), a refused one as an error that wrote nothing, and a batch gives
every item its own outcome (created / same / conflict / invalid)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.factories import T0, definition
from tickwheel.app.definitions import DefinitionService
from tickwheel.app.executions import ExecutionService
from tickwheel.app.outcomes import Outcome
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.definition_refs import to_uri
from tickwheel.domain.errors import Conflict, InvalidInput
from tickwheel.domain.models import ExecutionFilter
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import SubmitRequest
from tickwheel.store.protocol import Store

URI = "registry://jobs/greet"


def request(key: str | None = "k1", name: str = "Ada", **fields: Any) -> SubmitRequest:
    return SubmitRequest(definition_uri=URI, inputs={"name": name}, idempotency_key=key, **fields)


async def service(store: Store, tenant: str = "acme") -> ExecutionService:
    clock = FakeClock(T0)
    await DefinitionService(store, tenant, clock).apply(definition())
    return ExecutionService(store, tenant, clock)


async def stored_count(store: Store, tenant: str = "acme") -> int:
    return len(await store.execution_list(tenant, ExecutionFilter(), None, 100))


async def test_an_idempotent_submit_is_created_then_same_then_a_conflict(store: Store) -> None:
    executions = await service(store)
    first = await executions.submit(request())
    assert first.outcome is Outcome.CREATED and first.created  # due now: READY at once
    assert first.value.status is ExecutionStatus.READY and first.value.tenant == "acme"

    again = await executions.submit(request())
    assert again.outcome is Outcome.SAME and not again.created
    assert again.value.execution_id == first.value.execution_id

    with pytest.raises(Conflict) as conflict:
        await executions.submit(request(name="Grace"))
    assert conflict.value.details["executionId"] == str(first.value.execution_id)
    assert await stored_count(store) == 1


async def test_invalid_input_changes_nothing(store: Store) -> None:
    executions = await service(store)
    with pytest.raises(InvalidInput) as bad:
        await executions.submit(request(priority=1000))
    assert [e.path for e in bad.value.errors] == ["priority"]
    with pytest.raises(InvalidInput, match="no definition is registered"):
        await executions.submit(SubmitRequest(definition_uri="registry://jobs/nope"))
    with pytest.raises(InvalidInput):
        await executions.submit(request(execute_at=T0 + timedelta(days=1000)))
    assert await stored_count(store) == 0
    # Another tenant does not see acme's definition: its submission is invalid too.
    with pytest.raises(InvalidInput):
        await ExecutionService(store, "globex", FakeClock(T0)).submit(request())
    assert await stored_count(store, "globex") == 0


async def test_a_batch_gives_each_item_its_outcome_in_order(store: Store) -> None:
    executions = await service(store)
    existing = (await executions.submit(request("taken"))).value

    results = await executions.submit_many(
        [
            request("new"),
            request("bad", priority=-1000),
            request("taken"),
            request("taken", name="Grace"),
        ]
    )

    assert [r.outcome for r in results] == [
        Outcome.CREATED,
        Outcome.INVALID,
        Outcome.SAME,
        Outcome.CONFLICT,
    ]
    created, invalid, same, conflict = results
    assert created.value is not None and created.error is None
    assert isinstance(invalid.error, InvalidInput) and invalid.value is None
    assert same.value is not None and same.value.execution_id == existing.execution_id
    assert isinstance(conflict.error, Conflict) and conflict.value is None
    assert await stored_count(store) == 2


async def test_the_list_says_whether_another_page_follows(store: Store) -> None:
    executions = await service(store)
    ids = [(await executions.submit(request(f"k{i}"))).value.execution_id for i in range(3)]
    first = await executions.list(ExecutionFilter(), None, 2)
    assert [e.execution_id for e in first.items] == ids[::-1][:2] and first.more
    rest = await executions.list(ExecutionFilter(), first.items[-1].execution_id, 2)
    assert [e.execution_id for e in rest.items] == [ids[0]] and not rest.more


async def test_cancel_returns_the_execution_and_a_second_cancel_is_a_conflict(
    store: Store,
) -> None:
    executions = await service(store)
    submitted = (await executions.submit(request())).value
    cancelled = await executions.cancel(submitted.execution_id)
    assert cancelled.status is ExecutionStatus.CANCELLED
    with pytest.raises(Conflict) as refused:
        await executions.cancel(submitted.execution_id)
    assert refused.value.details == {"status": "CANCELLED"}
    history = await executions.history(submitted.execution_id)
    assert [str(e.kind) for e in history] == ["cancelled"]


class _TickingClock(FakeClock):
    """Moves a millisecond every time it is read."""

    def now(self) -> datetime:
        return self.advance(0.001)


async def test_a_batch_by_ids_has_the_full_batchs_outcomes(store: Store) -> None:
    """``submit_many_ids`` (the SDK's ``answer="ids"``): per item the outcome and error
    ``submit_many`` gives and the id of the execution it gives, also the second time round,
    when every key is taken (the same batch in two tenants of their own)."""
    full, ids = await service(store, "full"), await service(store, "ids")
    for executions in (full, ids):
        await executions.submit(request("taken"))

    def batch() -> list[SubmitRequest]:
        return [
            request("new"),
            request("bad", priority=-1000),
            request("taken"),
            request("taken", name="Grace"),
            request("new", name="Bob"),
            request(None),
            request("new"),
        ]

    for _ in range(2):
        by_model = await full.submit_many(batch())
        by_id = await ids.submit_many_ids(batch())
        assert [r.outcome for r in by_id] == [r.outcome for r in by_model]
        assert [type(r.error) for r in by_id] == [type(r.error) for r in by_model]
        assert [r.error and r.error.details for r in by_id][:2] == [
            r.error and r.error.details for r in by_model
        ][:2]
        assert [r.execution_id is None for r in by_id] == [r.value is None for r in by_model]
        for r in by_id:
            if r.execution_id is not None:
                stored = await store.execution_get("ids", r.execution_id)
                assert stored is not None
    assert by_id[0].execution_id == by_id[6].execution_id
    assert [r.outcome for r in by_id] == [
        Outcome.SAME,
        Outcome.INVALID,
        Outcome.SAME,
        Outcome.CONFLICT,
        Outcome.CONFLICT,
        Outcome.CREATED,
        Outcome.SAME,
    ]
    assert await stored_count(store, "ids") == await stored_count(store, "full") == 4


async def test_the_items_of_a_batch_are_submitted_at_one_instant(store: Store) -> None:
    """A batch is one statement: its items share the instant it was taken (created, and due
    then unless they say otherwise), their ids still in the order of the items."""
    clock = _TickingClock(T0)
    await DefinitionService(store, "acme", clock).apply(definition())
    executions = ExecutionService(store, "acme", clock)
    results = await executions.submit_many([request(f"k{i}") for i in range(5)])
    stored = [r.value for r in results if r.value is not None]
    assert len(stored) == 5
    assert len({e.created_at for e in stored}) == 1
    assert {e.execute_at for e in stored} == {stored[0].created_at}
    assert [e.execution_id for e in stored] == sorted(e.execution_id for e in stored)


async def test_a_batch_with_bare_names_is_the_batch_with_their_uris(store: Store) -> None:
    """``bare_names`` (the SDK's batches): a bare name is taken as its URI without a copy of the
    request, with the same outcomes, the same fingerprints and the same messages; without it (a
    request from outside) a bare name stays refused."""
    executions = await service(store)
    bare = [
        SubmitRequest(definition_uri="greet", inputs={"name": "Ada"}, idempotency_key="b1"),
        SubmitRequest(definition_uri="greet", inputs={"name": "Ada"}, idempotency_key="b2"),
        SubmitRequest(definition_uri="nope", idempotency_key="b3"),
        SubmitRequest(definition_uri="Not A Name", idempotency_key="b4"),
        SubmitRequest(definition_uri="greet", inputs={"name": "Ada"}, idempotency_key="b2"),
        SubmitRequest(definition_uri="greet", inputs={"name": "Bo"}, idempotency_key="b1"),
    ]
    named = [dataclasses.replace(r, definition_uri=to_uri(r.definition_uri)) for r in bare]
    first = await executions.submit_many(bare, bare_names=True)
    assert [r.outcome for r in first] == [
        Outcome.CREATED,
        Outcome.CREATED,
        Outcome.INVALID,
        Outcome.INVALID,
        Outcome.SAME,
        Outcome.CONFLICT,
    ]
    # The same requests with their URIs are the same requests: SAME, one conflict, no more rows.
    again = await executions.submit_many(named)
    assert [r.outcome for r in again] == [
        Outcome.SAME,
        Outcome.SAME,
        Outcome.INVALID,
        Outcome.INVALID,
        Outcome.SAME,
        Outcome.CONFLICT,
    ]
    for one, other in zip(first, again, strict=True):
        if one.value is not None:
            assert other.value is not None and one.value == other.value
            assert one.value.definition_uri == URI
        if one.error is not None:
            assert other.error is not None
            assert (one.error.message, one.error.details) == (
                other.error.message,
                other.error.details,
            )
    assert "registry://jobs/nope" in str(first[2].error)
    assert await stored_count(store) == 2
    # A request from outside names its definition by its URI: a bare name is refused.
    refused = await executions.submit_many(bare[:1])
    assert refused[0].outcome is Outcome.INVALID
    assert [e.path for e in refused[0].error.errors] == ["definitionUri"]  # type: ignore[union-attr]
