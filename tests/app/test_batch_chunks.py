"""A batch answered with ids in chunks (``submit_many_ids(..., in_chunks=True)``, larger than
``executions.CHUNK``, made small here): its requests sorted by key and made a chunk at a time
while the store writes the previous chunk, in one transaction. Its answer must be the one of
the same batch in one piece, item by item, on both backends."""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from tests.app.test_executions import URI, request, service, stored_count
from tests.factories import definition
from tickwheel.app import batch_preparation
from tickwheel.app import executions as executions_module
from tickwheel.app.definitions import DefinitionService
from tickwheel.app.executions import ExecutionService
from tickwheel.app.outcomes import IdOutcome, Outcome
from tickwheel.domain.definitions import Definition
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import NewExecution, SubmitRequest
from tickwheel.store.due import DueNews
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.protocol import Store


def batch() -> list[SubmitRequest]:
    return [
        request("n-z"),
        request("bad", priority=-1000),
        request("taken"),
        request("taken", name="Grace"),
        SubmitRequest(definition_uri="registry://jobs/nope", idempotency_key="nope"),
        request("n-a"),
        request(None),
        request("n-z", name="Bob"),  # the first one's key, in a later chunk: another body
        request("n-m"),
        request("n-a"),  # a repeat of an earlier chunk's item
        SubmitRequest(definition_uri=URI, definition_version=7, idempotency_key="v7"),
        SubmitRequest(definition_uri="not a uri", idempotency_key="n-c"),
        request("n-b", name="Ann"),
    ]


def _answer(results: list[IdOutcome]) -> list[tuple[object, ...]]:
    """What a receipt says but the ids themselves (each tenant's own): its outcome, whether it
    has an id, its error's message and details (the id of a conflict's holder left out)."""
    answers: list[tuple[object, ...]] = []
    for r in results:
        error: tuple[str, object] | None = None
        if r.error is not None:
            details = r.error.details
            if isinstance(details, dict) and "executionId" in details:  # a conflict's
                held = details["executionId"]
                details = {k: v for k, v in details.items() if k != "executionId"}
                error = (r.error.message.replace(held, "<id>"), details)
            else:
                error = (r.error.message, details)
        answers.append((r.outcome, r.execution_id is None, error))
    return answers


async def test_a_batch_in_chunks_answers_as_the_batch_in_one_piece(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(executions_module, "CHUNK", 2)
    whole, chunked = await service(store, "whole"), await service(store, "chunked")
    calls: list[int] = []
    in_chunks = store.execution_insert_or_existing_chunks

    async def counted(chunks: Any) -> Any:
        calls.append(1)
        return await in_chunks(chunks)

    monkeypatch.setattr(store, "execution_insert_or_existing_chunks", counted)
    for executions in (whole, chunked):
        await executions.submit(request("taken"))
    for _ in range(2):  # the second time round every key is taken
        in_one = await whole.submit_many_ids(batch())
        by_chunks = await chunked.submit_many_ids(batch(), in_chunks=True)
        assert _answer(by_chunks) == _answer(in_one)
    assert len(calls) == 2  # the chunked batches only
    assert [r.outcome for r in by_chunks] == [
        Outcome.SAME,
        Outcome.INVALID,
        Outcome.SAME,
        Outcome.CONFLICT,
        Outcome.INVALID,
        Outcome.SAME,
        Outcome.CREATED,
        Outcome.CONFLICT,
        Outcome.SAME,
        Outcome.SAME,
        Outcome.INVALID,
        Outcome.INVALID,
        Outcome.SAME,
    ]
    assert by_chunks[5].execution_id == by_chunks[9].execution_id
    assert await stored_count(store, "chunked") == await stored_count(store, "whole") == 7


async def test_a_batch_with_bare_names_in_chunks_is_the_batch_in_one_piece(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's batches (bare names): a chunk made after the names were read is the same."""
    monkeypatch.setattr(executions_module, "CHUNK", 2)
    whole, chunked = await service(store, "whole"), await service(store, "chunked")

    def bare() -> list[SubmitRequest]:
        return [
            SubmitRequest(definition_uri="greet", inputs={"name": "Ada"}, idempotency_key="b5"),
            SubmitRequest(definition_uri="nope", idempotency_key="b4"),
            SubmitRequest(definition_uri="Not A Name", idempotency_key="b3"),
            SubmitRequest(definition_uri="greet", inputs={"name": "Bo"}, idempotency_key="b2"),
            SubmitRequest(definition_uri="greet", inputs={"name": "Ada"}, idempotency_key="b5"),
        ]

    in_one = await whole.submit_many_ids(bare(), bare_names=True)
    by_chunks = await chunked.submit_many_ids(bare(), bare_names=True, in_chunks=True)
    assert _answer(by_chunks) == _answer(in_one)
    assert [r.outcome for r in by_chunks] == [
        Outcome.CREATED,
        Outcome.INVALID,
        Outcome.INVALID,
        Outcome.CREATED,
        Outcome.SAME,
    ]


@pytest.mark.parametrize("drawn", ["at-once", "each"])
async def test_the_ids_of_a_batch_in_chunks_follow_its_requests(
    store: Store, monkeypatch: pytest.MonkeyPatch, drawn: str
) -> None:
    """Made in key order, the items still take their ids by their requests' places: the
    executions of a batch are in the order of its requests, as one piece's are; also when the
    ids cannot be drawn as one run (``uuid7_run``'s None) and are drawn one by one."""
    executions = await service(store)
    if drawn == "each":
        monkeypatch.setattr(batch_preparation, "uuid7_run", lambda at, count: None)
    monkeypatch.setattr(executions_module, "FIRST_CHUNK", 1)  # chunks of 1, 3, 3 and 3
    monkeypatch.setattr(executions_module, "CHUNK", 3)
    keys = [f"k{n}" for n in (9, 3, 7, 1, 8, 2, 6, 4, 5, 0)]
    results = await executions.submit_many_ids([request(k) for k in keys], in_chunks=True)
    assert all(r.outcome is Outcome.CREATED for r in results)
    ids = [r.execution_id for r in results]
    assert ids == sorted(ids)  # type: ignore[type-var]
    assert len(set(ids)) == len(ids)
    for key, execution_id in zip(keys, ids, strict=True):
        assert execution_id is not None
        stored = await store.execution_get("acme", execution_id)
        assert stored is not None and stored.idempotency_key == key


async def test_a_definition_named_only_by_refused_requests_is_not_read_ahead(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read ahead reads what the batch in one piece reads: a definition named by requests
    that are refused before any definition is read (its rate limit's bucket, a write, not made
    for them), and each other one once."""
    executions = await service(store)
    await DefinitionService(store, "acme", executions.clock).apply(definition("other"))
    monkeypatch.setattr(executions_module, "CHUNK", 2)
    read: list[tuple[str, int | None]] = []
    pinned = ExecutionService.pinned

    async def spied(self: ExecutionService, name: str, version: int | None) -> Definition | None:
        read.append((name, version))
        return await pinned(self, name, version)

    monkeypatch.setattr(ExecutionService, "pinned", spied)
    other = "registry://jobs/other"
    requests = [
        SubmitRequest(definition_uri=other, priority=-1000, idempotency_key="o-1"),
        request("g-1"),
        SubmitRequest(definition_uri=other, idempotency_key="o-2", priority=10**6),
        request("g-2"),
        request("g-3", priority=-1000),
    ]
    results = await executions.submit_many_ids(requests, in_chunks=True)
    assert [r.outcome for r in results] == [
        Outcome.INVALID,
        Outcome.CREATED,
        Outcome.INVALID,
        Outcome.CREATED,
        Outcome.INVALID,
    ]
    assert read == [("greet", None)]


@pytest.mark.postgres
async def test_a_batch_in_chunks_reads_its_definitions_before_it_holds_a_connection(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunks' transaction holds a connection while the next chunk is made: the
    definitions of the whole batch are read before, so that a batch naming one in a later
    chunk (or one not registered) needs no second connection. On a pool of one it would wait
    for itself until the pool's timeout."""
    pg = await PostgresStore.open(pg_url, max_size=1, timeout=3)
    await pg.migrate()
    try:
        executions = await service(pg, "pinned")
        await DefinitionService(pg, "pinned", executions.clock).apply(definition("other"))
        monkeypatch.setattr(executions_module, "CHUNK", 2)
        requests = [
            request("p-1"),
            request("p-2"),
            request("p-3"),
            SubmitRequest(definition_uri="registry://jobs/nope", idempotency_key="p-4"),
            SubmitRequest(
                definition_uri="registry://jobs/other",
                inputs={"name": "Ada"},
                idempotency_key="p-5",
            ),
        ]
        results = await executions.submit_many_ids(requests, in_chunks=True)
        assert [r.outcome for r in results] == [Outcome.CREATED] * 3 + [
            Outcome.INVALID,
            Outcome.CREATED,
        ]
        assert "no definition is registered as registry://jobs/nope" in str(results[3].error)
    finally:
        await pg.close()


async def test_the_items_of_a_chunk_sent_are_not_kept(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the store has taken a chunk, neither it (PostgreSQL: it keeps what it answers with,
    not the items) nor the service (``SentBatch``) keeps its items: a batch in flight keeps no
    object per item but its id, where keeping every item until the answer moved most of a
    batch's objects into the garbage collector's oldest generation. SQLite takes every chunk
    before it writes (one writer): nothing to hold there. The answer stays the batch's."""
    if not isinstance(store, PostgresStore):
        pytest.skip("SQLite gathers the chunks before its one insert")
    executions = await service(store)
    monkeypatch.setattr(executions_module, "FIRST_CHUNK", 2)
    monkeypatch.setattr(executions_module, "CHUNK", 2)
    in_chunks = store.execution_insert_or_existing_chunks
    sent: list[list[weakref.ref[NewExecution]]] = []
    alive_before: list[int] = []

    def alive(chunks: list[list[weakref.ref[NewExecution]]]) -> int:
        return sum(ref() is not None for chunk in chunks for ref in chunk)

    async def watched(chunks: Any) -> Any:
        async def passed() -> AsyncIterator[Any]:
            async for chunk in chunks:
                # The chunk before the last one taken may still be in the store's hands.
                alive_before.append(alive(sent[:-1]))
                sent.append([weakref.ref(i) for i in chunk])
                yield chunk
            alive_before.append(alive(sent[:-1]))

        return await in_chunks(passed())

    monkeypatch.setattr(store, "execution_insert_or_existing_chunks", watched)
    requests = [request(f"w-{n}") for n in range(9)]
    results = await executions.submit_many_ids(requests, in_chunks=True)
    assert [r.outcome for r in results] == [Outcome.CREATED] * 9
    assert len(sent) == 5 and alive_before == [0] * 6


async def test_a_batch_in_chunks_signals_what_it_inserted(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The due hints of a batch in chunks (whose store keeps its SCHEDULED items only): each
    SCHEDULED item it inserted, none for an item whose key was taken, both when every item is
    inserted and when some are not."""
    executions = await service(store)
    monkeypatch.setattr(executions_module, "FIRST_CHUNK", 1)
    monkeypatch.setattr(executions_module, "CHUNK", 2)
    inbox = store.due_hints()
    if isinstance(store, PostgresStore):
        assert await store.listen(5)
    later = executions.clock.now() + timedelta(seconds=30)
    await executions.submit(request("s-taken", execute_at=later + timedelta(seconds=1)))
    inbox.take()

    def batch(prefix: str) -> list[SubmitRequest]:
        return [
            request(f"{prefix}-1", execute_at=later),
            request(f"{prefix}-2"),
            request("s-taken", execute_at=later + timedelta(seconds=1)),
            request(f"{prefix}-3", execute_at=later + timedelta(seconds=2)),
            request(f"{prefix}-4"),
        ]

    for prefix, taken in (("all", False), ("some", True)):
        requests = batch(prefix)
        if not taken:
            del requests[2]
        results = await executions.submit_many_ids(requests, in_chunks=True)
        ids = {r.execution_id for r in results if r.outcome is Outcome.CREATED}
        assert len(ids) == 4
        scheduled = [
            e
            for e in [await store.execution_get("acme", i) for i in ids if i is not None]
            if e is not None and e.status is ExecutionStatus.SCHEDULED
        ]
        assert len(scheduled) == 2
        hinted = sorted((e.shard_id, e.execute_at) for e in scheduled)
        assert inbox.take() == DueNews(hinted, poked=True)
