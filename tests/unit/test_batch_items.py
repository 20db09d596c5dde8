"""A batch's items made together (domain/batch_items.py), held to the plain way: the ids drawn
at once are those ``uuid7`` gives one call at a time, and an item made from the run of a plain
request is the one ``prepare_execution`` makes, for every shape that may or may not take that
way; the common shape's early return from ``check_request_shape`` refuses what the whole
check refuses."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.factories import definition
from tickwheel.domain import ids
from tickwheel.domain.batch_items import PlainRun, ids_and_shards
from tickwheel.domain.concurrency import spec_of
from tickwheel.domain.definition_refs import name_of
from tickwheel.domain.errors import InvalidInput
from tickwheel.domain.ids import uuid7, uuid7_run
from tickwheel.domain.sharding import shard_id, shard_of_int
from tickwheel.domain.submission import (
    SubmitLimits,
    SubmitRequest,
    check_request_shape,
    plain_request,
    prepare_execution,
)

NOW = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
URI = "registry://jobs/greet"
TRACE = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}


class _Key(str):
    """A str subclass as a key: not of the plain shape (the whole way checks it)."""


FIRST = SubmitRequest(definition_uri=URI, idempotency_key="k-0", priority=3)

OTHERS = [
    SubmitRequest(definition_uri=URI, idempotency_key="k-1", priority=3),
    SubmitRequest(definition_uri=URI, priority=3),  # no key
    SubmitRequest(definition_uri=URI, idempotency_key="k-0", priority=3),  # the same key
    SubmitRequest(definition_uri=URI, idempotency_key="é☃", priority=3),
    SubmitRequest(definition_uri=URI, idempotency_key="x" * 255, priority=3),
    SubmitRequest(definition_uri=URI, idempotency_key="x" * 256, priority=3),  # too long
    SubmitRequest(definition_uri=URI, idempotency_key="", priority=3),  # empty
    SubmitRequest(definition_uri=URI, idempotency_key="a\nb", priority=3),  # not printable
    SubmitRequest(definition_uri=URI, idempotency_key="a\x00b", priority=3),
    SubmitRequest(definition_uri=URI, idempotency_key=_Key("k-2"), priority=3),
    SubmitRequest(definition_uri=URI, idempotency_key=7, priority=3),  # type: ignore[arg-type]
    SubmitRequest(definition_uri=URI, idempotency_key="k-3"),  # another priority
    SubmitRequest(definition_uri=URI, idempotency_key="k-4", priority=3.0),  # type: ignore[arg-type]
    SubmitRequest(definition_uri=URI, idempotency_key="k-5", definition_version=1, priority=3),
    SubmitRequest(definition_uri="greet", idempotency_key="k-6", priority=3),  # a bare name
    SubmitRequest(definition_uri=URI, inputs={"name": "a"}, idempotency_key="k-7", priority=3),
    SubmitRequest(definition_uri=URI, execute_at=NOW, idempotency_key="k-8", priority=3),
    SubmitRequest(
        definition_uri=URI, start_by=NOW + timedelta(hours=1), idempotency_key="k-9", priority=3
    ),
    SubmitRequest(
        definition_uri=URI, deadline=NOW + timedelta(hours=1), idempotency_key="k-a", priority=3
    ),
    SubmitRequest(
        definition_uri=URI,
        concurrency=spec_of({"key": "x", "limit": 1}),
        idempotency_key="k-b",
        priority=3,
    ),
    SubmitRequest(definition_uri=URI, trace_context=TRACE, idempotency_key="k-c", priority=3),
]
TAKEN = {0, 1, 2, 3, 4}
"""The places in ``OTHERS`` of the requests the run makes (the others take the whole way)."""


@pytest.mark.parametrize(
    "doc",
    [{}, {"startBy": 60, "deadline": 120}, {"concurrency": {"limit": 2}}],
    ids=["plain", "limits", "concurrency"],
)
def test_an_item_made_by_the_run_is_the_item_prepare_execution_makes(doc: dict[str, Any]) -> None:
    d = definition(inputs={}, **doc)
    made_ids, shards = ids_and_shards(NOW, len(OTHERS) + 1)
    first = prepare_execution(FIRST, d, "acme", NOW, TRACE, URI, (made_ids[0], shards[0]))
    run = PlainRun.of(FIRST, first)
    assert run is not None
    for index, request in enumerate(OTHERS, 1):
        made = run.make(request, made_ids[index], shards[index])
        assert (made is not None) == (index - 1 in TAKEN), request
        if made is None:
            continue
        expected = prepare_execution(
            request, d, "acme", NOW, TRACE, URI, (made_ids[index], shards[index])
        )
        assert made == expected and made.__dict__ == expected.__dict__
        assert set(made.__dict__) == set(expected.__dict__)
        assert made.inputs is not first.inputs  # each item's own dictionary


def test_a_run_is_made_only_of_a_plain_request_whose_item_has_no_inputs() -> None:
    with_default = definition(inputs={"times": {"type": "integer", "default": 1}})
    item = prepare_execution(FIRST, with_default, "acme", NOW)
    assert item.inputs == {"times": 1} and PlainRun.of(FIRST, item) is None
    for request in OTHERS[6:]:
        if not plain_request(request):
            assert PlainRun.of(request, item) is None


def test_ids_drawn_at_once_are_those_of_one_call_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ids, "_last_ms", 0)  # restored after the test
    monkeypatch.setattr(ids, "_last_rand", 0)
    monkeypatch.setattr(ids.os, "urandom", lambda n: bytes(range(7, 7 + n)))  # one draw
    later = NOW + timedelta(milliseconds=3)
    for at, count in [(NOW, 1), (NOW, 5), (later, 1000), (NOW, 3)]:  # NOW again: earlier
        state = (ids._last_ms, ids._last_rand)
        made, shards = ids_and_shards(at, count)
        after = (ids._last_ms, ids._last_rand)
        ids._last_ms, ids._last_rand = state
        assert made == [uuid7(at) for _ in range(count)]
        assert (ids._last_ms, ids._last_rand) == after
        assert shards == [shard_id(i) for i in made] == [shard_of_int(i.int) for i in made]
        assert all(a < b for a, b in itertools.pairwise(made))


def test_a_run_that_would_carry_out_of_its_random_bits_is_made_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ms = (NOW - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    monkeypatch.setattr(ids, "_last_ms", ms)
    monkeypatch.setattr(ids, "_last_rand", (1 << 62) - 3)  # rand_b two short of its end
    assert uuid7_run(NOW, 5) is None and ids._last_rand == (1 << 62) - 3
    made, shards = ids_and_shards(NOW, 5)
    assert all(a < b for a, b in itertools.pairwise(made))
    assert shards == [shard_id(i) for i in made]
    monkeypatch.setattr(ids, "_last_rand", (1 << 74) - 1)  # at the end of the 74 bits
    assert uuid7_run(NOW, 1) is None


SHAPES = [
    FIRST,
    *OTHERS,
    SubmitRequest(definition_uri=URI, priority=101),
    SubmitRequest(definition_uri=URI, priority=True),
    SubmitRequest(definition_uri=URI, definition_version=0),
    SubmitRequest(definition_uri=URI, definition_version=True),
    SubmitRequest(definition_uri=URI, inputs=[]),  # type: ignore[arg-type]
    SubmitRequest(definition_uri=URI, inputs={"n": 10**300}),
    SubmitRequest(definition_uri="no such uri", idempotency_key="k"),
    SubmitRequest(definition_uri="", idempotency_key="k"),
    SubmitRequest(definition_uri=URI, execute_at=NOW.replace(tzinfo=None)),
]


@pytest.mark.parametrize("request_", SHAPES)
def test_the_common_shapes_early_return_refuses_what_the_whole_check_refuses(
    request_: SubmitRequest,
) -> None:
    """Checked with its URI known well formed (the early return's case) and with no URI known
    (the whole check): the same refusal, or none."""
    limits = SubmitLimits()

    def refusal(well_formed: str | None) -> Any:
        try:
            check_request_shape(request_, NOW, limits, None, well_formed)
        except (InvalidInput, TypeError) as exc:
            return type(exc), str(exc), getattr(exc, "details", None)
        return None

    uri = request_.definition_uri
    known = uri if name_of(uri) is not None else "registry://jobs/last"  # only one well formed
    assert refusal(known) == refusal(None) == refusal("registry://jobs/other")
