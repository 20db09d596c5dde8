"""The submit path's fast ways of doing what a plain way also does, held to the plain way: the
fingerprint written by hand (to the byte of the canonical JSON), the PostgreSQL insert's JSON
rows and the Executions made from the items without ``__init__``, and a batch's results
validated in one call. Each pair is compared over shapes that take every branch."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from tests.factories import T0, definition
from tickwheel.app.outcomes import ItemOutcome, Outcome
from tickwheel.client.requests import definition_uri, with_uris
from tickwheel.client.transports.inprocess import item_result, item_results
from tickwheel.domain.concurrency import spec_of
from tickwheel.domain.errors import Conflict, InvalidInput
from tickwheel.domain.sharding import bucket_start
from tickwheel.domain.submission import (
    NewExecution,
    SubmitRequest,
    fingerprint,
    fingerprint_reference,
    prepare_execution,
)
from tickwheel.resources.executions import BatchItemResult, execution_fields
from tickwheel.store.postgres.rows import (
    INSERT_ONE,
    execution_from_new,
    execution_from_new_reference,
    insert_items,
    insert_items_reference,
    insert_statement,
)

PARIS = timezone(timedelta(hours=1))
ODD = timezone(timedelta(hours=-3, minutes=-30, seconds=-7))

REQUESTS = [
    SubmitRequest(definition_uri="registry://jobs/greet"),
    SubmitRequest(definition_uri="greet"),
    SubmitRequest(definition_uri='registry://jobs/"quoted"\\\n\u00e9\u2603\U0001f600'),
    SubmitRequest(definition_uri="registry://jobs/g", definition_version=7, priority=-100),
    SubmitRequest(definition_uri="registry://jobs/g", priority=True),  # a bool: json's "true"
    SubmitRequest(definition_uri="registry://jobs/g", definition_version=True),
    SubmitRequest(definition_uri="registry://jobs/g", execute_at=T0),
    SubmitRequest(definition_uri="g", execute_at=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=PARIS)),
    SubmitRequest(definition_uri="g", execute_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=ODD)),
    SubmitRequest(
        definition_uri="registry://jobs/g",
        inputs={"b": [1, 2.5, None, True, {"z": 1, "a": "\u00e9"}], "a": "x\ty", "\u2603": 1e300},
    ),
    SubmitRequest(definition_uri="registry://jobs/g", inputs={"n": float("inf")}),
    SubmitRequest(definition_uri="registry://jobs/g", inputs=[] ),  # type: ignore[arg-type]
    SubmitRequest(definition_uri="registry://jobs/g", start_by=T0 + timedelta(hours=1)),
    SubmitRequest(definition_uri="registry://jobs/g", deadline=T0.astimezone(PARIS)),
    SubmitRequest(
        definition_uri="registry://jobs/g",
        concurrency=spec_of({"key": "${{ inputs.a }}", "limit": 2, "order": "none"}),
        inputs={"a": "x"},
    ),
]  # fmt: skip


class _Text(str):
    """A str subclass: encoded by ``json`` as a string all the same."""


HOSTILE = [
    SubmitRequest(definition_uri="registry://jobs/\ud800x"),  # a lone surrogate
    SubmitRequest(definition_uri="g", inputs={"\udfff": "\ud800", "n": 10**300}),
    SubmitRequest(definition_uri="g", priority=-(2**63), definition_version=2**63),
    SubmitRequest(definition_uri="g", inputs={"ip": "169.254.169.254", "f": -0.0}),
]
"""Values a hostile submitter sends (lone surrogates, huge integers): the fast writer must give
the reference's bytes for them too, or a retried request would be refused as another one."""


@pytest.mark.parametrize(
    "request_", [*REQUESTS, *HOSTILE, SubmitRequest(definition_uri=_Text("x"))]
)
def test_the_fingerprint_is_the_reference_fingerprint(request_: SubmitRequest) -> None:
    assert fingerprint(request_) == fingerprint_reference(request_)


def test_the_last_plain_fingerprint_kept_is_only_its_own() -> None:
    """A request without executeAt or inputs reuses the last such one's fingerprint only when
    its URI, version and priority are the same values; each in turn, any order."""
    plain = [
        SubmitRequest(definition_uri="registry://jobs/g", idempotency_key="a"),
        SubmitRequest(definition_uri="registry://jobs/g", idempotency_key="b"),
        SubmitRequest(definition_uri="registry://jobs/h"),
        SubmitRequest(definition_uri="registry://jobs/h", definition_version=1),
        SubmitRequest(definition_uri="registry://jobs/h", definition_version=1, priority=1),
        SubmitRequest(definition_uri="registry://jobs/h", priority=1),
        SubmitRequest(definition_uri="registry://jobs/h", priority=True),
        SubmitRequest(definition_uri="registry://jobs/h", definition_version=True),
        SubmitRequest(definition_uri="registry://jobs/h", inputs={"a": 1}),
        SubmitRequest(definition_uri="registry://jobs/h", execute_at=T0),
        SubmitRequest(definition_uri="", idempotency_key="z"),
    ]
    for order in (
        plain,
        plain[::-1],
        plain + plain,
        [r for pair in zip(plain, plain[::-1], strict=True) for r in pair],
    ):
        for request_ in order:
            assert fingerprint(request_) == fingerprint_reference(request_)
            uri = "registry://jobs/other"
            assert fingerprint(request_, uri) == fingerprint_reference(request_, uri)
    assert len({fingerprint(r) for r in plain}) == len(plain) - 1  # a and b are the same


def items() -> list[NewExecution]:
    """Items of one batch: the batch's instant shared, executeAt in other offsets, SCHEDULED and
    READY, with and without a concurrency group and a trace context."""
    d = definition(inputs={"name": "string"}, startBy=60)
    limited = definition(inputs={"name": "string"}, concurrency={"limit": 1})
    now = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
    requests = [
        (SubmitRequest(definition_uri="registry://jobs/greet", inputs={"name": "a"}), d),
        (SubmitRequest(definition_uri="registry://jobs/greet", inputs={"name": "b"}), d),
        (
            SubmitRequest(
                definition_uri="registry://jobs/greet",
                inputs={"name": "c"},
                execute_at=(now + timedelta(minutes=5)).astimezone(PARIS),
                deadline=(now + timedelta(hours=1)).astimezone(ODD),
                idempotency_key="k",
            ),
            d,
        ),
        # Equal instants with different offsets: each is written with its own.
        (
            SubmitRequest(
                definition_uri="registry://jobs/greet",
                inputs={"name": "d"},
                execute_at=(now + timedelta(minutes=5)).astimezone(ODD),
            ),
            limited,
        ),
    ]
    trace = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    return [
        prepare_execution(r, definition_, "acme", now, trace if i % 2 else None)
        for i, (r, definition_) in enumerate(requests)
    ]


def test_the_insert_rows_are_the_reference_rows() -> None:
    batch = items()
    assert insert_items(batch) == insert_items_reference(batch)
    assert insert_items(batch[2:]) == insert_items_reference(batch[2:])
    for one in batch:  # a single item: a text parameter per column
        params = insert_items([one])
        assert params == insert_items_reference([one])
        assert "items" not in params and insert_statement(params) is INSERT_ONE


@pytest.mark.parametrize(
    ("key", "typed"),
    [("k-1", True), ("clé-é", True), ("a\x00b", False), ("a\ud800b", False)],
)
def test_a_single_item_that_libpq_cannot_take_as_text_goes_as_json(key: str, typed: bool) -> None:
    """A NUL would cut a text parameter short and a lone surrogate has no UTF-8: such an item
    is sent as the JSON row (the server refuses it there, as it always did)."""
    [one] = items()[:1]
    item = dataclasses.replace(one, idempotency_key=key)
    params = insert_items([item])
    assert params == insert_items_reference([item])
    assert (insert_statement(params) is INSERT_ONE) is typed
    if not typed:  # the batch statement's shape, nothing shared: the row whole
        assert json.loads(params["items"])[0][8] == key
        assert set(json.loads(params["shared"])) == {None}


def test_an_execution_from_its_item_is_the_reference_execution() -> None:
    for item in items():
        made, reference = execution_from_new(item), execution_from_new_reference(item)
        assert made == reference
        assert made.__dict__ == reference.__dict__  # the same fields set, with the same values
        assert all(v.tzinfo is UTC for v in made.__dict__.values() if isinstance(v, datetime))
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.status = reference.status  # type: ignore[misc]


def test_a_batchs_results_are_each_items_result() -> None:
    executions = [execution_from_new(i) for i in items()]
    outcomes: list[ItemOutcome[Any]] = [
        ItemOutcome(Outcome.CREATED, executions[0]),
        ItemOutcome(Outcome.SAME, executions[3]),
        ItemOutcome(Outcome.CONFLICT, error=Conflict("used", {"idempotencyKey": "k"})),
        ItemOutcome(Outcome.INVALID, error=InvalidInput("bad")),
        ItemOutcome(Outcome.CREATED, executions[2]),
    ]
    results = item_results(outcomes)
    assert results == [item_result(o) for o in outcomes]
    assert [r.model_fields_set for r in results] == [
        item_result(o).model_fields_set for o in outcomes
    ]
    # Each equal to what the validator makes of the answer's values (the code before).
    validated = [BatchItemResult.model_validate(_result_fields(o)) for o in outcomes]
    assert results == validated
    for made, reference in zip(results, validated, strict=True):
        assert made.model_fields_set == reference.model_fields_set
        assert list(made.__dict__.items()) == list(reference.__dict__.items())
        assert made.to_wire() == reference.to_wire()
        assert list(made.to_wire()) == list(reference.to_wire())
        if made.execution is not None:
            assert reference.execution is not None
            assert list(made.execution.__dict__) == list(reference.execution.__dict__)
            assert made.execution.model_fields_set == reference.execution.model_fields_set


def test_results_made_releasing_their_items_are_the_same() -> None:
    """``release``: the list given up is emptied item by item, the answers are the same."""
    executions = [execution_from_new(i) for i in items()]
    outcomes: list[ItemOutcome[Any]] = [ItemOutcome(Outcome.CREATED, e) for e in executions]
    outcomes.insert(1, ItemOutcome(Outcome.INVALID, error=InvalidInput("bad")))
    given = list(outcomes)
    assert item_results(given, release=True) == item_results(outcomes)
    assert given == [None] * len(outcomes)
    kept = tuple(outcomes)  # not a list: nothing to release
    assert item_results(kept, release=True) == item_results(outcomes)


def _result_fields(item: ItemOutcome[Any]) -> dict[str, Any]:
    status = {Outcome.CREATED: 201, Outcome.SAME: 200, Outcome.CONFLICT: 409}.get(item.outcome, 422)
    if item.error is not None:
        exc = item.error
        error = {"code": exc.code, "message": exc.message, "details": exc.details}
        return {"status": status, "error": error}
    return {"status": status, "execution": execution_fields(item.value)}


def test_a_prepared_item_is_what_its_init_would_make() -> None:
    for item in items():
        assert set(item.__dict__) == {f.name for f in dataclasses.fields(NewExecution)}
        made = NewExecution(**item.__dict__)
        assert made == item and made.__dict__ == item.__dict__
        with pytest.raises(dataclasses.FrozenInstanceError):
            item.priority = 1  # type: ignore[misc]


def test_each_item_is_in_the_bucket_of_its_own_instant() -> None:
    """The last bucket is kept by the instant's identity: never another instant's."""
    d = definition(inputs={"name": "string"})
    now = datetime(2026, 3, 1, 12, 0, 30, tzinfo=UTC)
    ats = [now, now, (now + timedelta(minutes=3)).astimezone(ODD), now, None, T0]
    for at in ats:
        request = SubmitRequest(definition_uri="registry://jobs/greet", inputs={"name": "a"})
        item = prepare_execution(dataclasses.replace(request, execute_at=at), d, "acme", now)
        assert item.bucket_start == bucket_start(item.execute_at)
        assert item.bucket_start.tzinfo is UTC


def test_a_bare_name_renamed_is_what_replace_would_make() -> None:
    """with_uris copies a request named by a bare name field by field: every field as
    ``dataclasses.replace`` gives it, in its order (the trace context too, which equality
    leaves out), and the request given is left as it was."""
    traced = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    given = [
        *REQUESTS,
        SubmitRequest(definition_uri="greet", inputs={"a": 1}, trace_context=traced),
    ]
    for request, renamed in zip(given, with_uris(given), strict=True):
        uri = definition_uri(request.definition_uri)
        expected = dataclasses.replace(request, definition_uri=uri)
        assert renamed == expected and renamed.trace_context == expected.trace_context
        assert vars(renamed) == vars(expected)
        assert list(vars(renamed)) == list(vars(expected))
        with pytest.raises(dataclasses.FrozenInstanceError):
            renamed.priority = 1  # type: ignore[misc]
        if uri != request.definition_uri:
            assert renamed is not request and request.definition_uri != uri
