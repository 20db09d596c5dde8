"""Turning a submit request into a new Execution (domain/submission.py): the shape checks made
before the store is touched, the idempotency fingerprint, and what is fixed at insert."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from tests.factories import T0, definition
from tickwheel.domain.definition_refs import URI_RULE
from tickwheel.domain.errors import InvalidInput
from tickwheel.domain.sharding import SHARD_COUNT, shard_id
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import (
    IDEMPOTENCY_KEY_MAX,
    SubmitLimits,
    SubmitRequest,
    check_request_shape,
    fingerprint,
    prepare_execution,
)

LIMITS = SubmitLimits()
URI = "registry://jobs/greet"


def request(**overrides: Any) -> SubmitRequest:
    fields: dict[str, Any] = {"definition_uri": URI, "inputs": {"name": "Ada"}}
    fields.update(overrides)
    return SubmitRequest(**fields)


def shape_errors(req: SubmitRequest, now: datetime = T0) -> list[tuple[str, str]]:
    """The (path, message) pairs ``check_request_shape`` reports; [] when it accepts."""
    try:
        check_request_shape(req, now, LIMITS)
    except InvalidInput as exc:
        assert exc.message == "the execution request is invalid"
        assert exc.details == [e.as_dict() for e in exc.errors]
        return [(e.path, e.message) for e in exc.errors]
    return []


# -- check_request_shape --------------------------------------------------------------------------


def test_a_good_request_passes() -> None:
    assert shape_errors(request()) == []
    assert (
        shape_errors(
            request(
                definition_version=3,
                execute_at=T0 + timedelta(hours=1),
                priority=-100,
                idempotency_key="k" * IDEMPOTENCY_KEY_MAX,
            )
        )
        == []
    )
    assert shape_errors(request(priority=100, definition_uri="registry://jobs/a.b-c_9")) == []


@pytest.mark.parametrize(
    "uri",
    [
        "",
        "greet",
        "registry://jobs/",
        "registry://jobs/Greet",
        "registry://jobs/-greet",
        "registry://jobs/greet/extra",
        "registry://job/greet",
        "https://jobs/greet",
        "registry://jobs/" + "a" * 129,
    ],
)
def test_bad_definition_uri(uri: str) -> None:
    errors = shape_errors(request(definition_uri=uri))
    assert errors == [("definitionUri", "must look like registry://jobs/<name>")]


@pytest.mark.parametrize("version", [0, -1, 2**31, 2**63])
def test_bad_definition_version(version: int) -> None:
    assert shape_errors(request(definition_version=version)) == [
        ("definitionVersion", f"must be a positive integer up to {2**31 - 1}")
    ]


@pytest.mark.parametrize("priority", [-101, 101, 10_000])
def test_bad_priority(priority: int) -> None:
    assert shape_errors(request(priority=priority)) == [
        ("priority", "must be between -100 and 100")
    ]


@pytest.mark.parametrize("key", ["", "k" * (IDEMPOTENCY_KEY_MAX + 1), "a\nb", "tab\there", "\x00"])
def test_bad_idempotency_key(key: str) -> None:
    assert shape_errors(request(idempotency_key=key)) == [
        ("Idempotency-Key", "must be 1 to 255 printable characters")
    ]


def test_naive_execute_at_is_refused() -> None:
    [(path, message)] = shape_errors(request(execute_at=datetime(2026, 3, 1, 12, 0)))
    assert path == "executeAt"
    assert "UTC offset" in message


def test_execute_at_window() -> None:
    assert shape_errors(request(execute_at=T0 - LIMITS.max_past)) == []
    assert shape_errors(request(execute_at=T0 + LIMITS.max_future)) == []
    too_old = shape_errors(request(execute_at=T0 - LIMITS.max_past - timedelta(seconds=1)))
    assert [path for path, _ in too_old] == ["executeAt"]
    assert too_old[0][1].endswith("in the past")
    too_far = shape_errors(request(execute_at=T0 + LIMITS.max_future + timedelta(seconds=1)))
    assert [path for path, _ in too_far] == ["executeAt"]
    assert too_far[0][1].endswith("in the future")


def test_limits_are_configurable() -> None:
    tight = SubmitLimits(max_past=timedelta(minutes=1), max_future=timedelta(hours=1))
    with pytest.raises(InvalidInput):
        check_request_shape(request(execute_at=T0 + timedelta(hours=2)), T0, tight)
    check_request_shape(request(execute_at=T0 + timedelta(minutes=59)), T0, tight)


def test_every_error_is_reported_at_once() -> None:
    errors = shape_errors(
        request(
            definition_uri="nope",
            definition_version=0,
            priority=500,
            idempotency_key="",
            execute_at=T0 + timedelta(days=1000),
        )
    )
    assert [path for path, _ in errors] == [
        "definitionUri",
        "definitionVersion",
        "priority",
        "Idempotency-Key",
        "executeAt",
    ]


# -- fingerprint ----------------------------------------------------------------------------------


def test_fingerprint_is_a_sha256_hex_digest_and_deterministic() -> None:
    fp = fingerprint(request(execute_at=T0))
    assert re.fullmatch(r"[0-9a-f]{64}", fp)
    assert fingerprint(request(execute_at=T0)) == fp


def test_the_fingerprint_never_changes() -> None:
    """Stored fingerprints decide whether a retried request is the same one, across upgrades:
    the digest of a request is pinned, whatever makes it faster."""
    pinned = request(
        inputs={"name": "Ada", "n": [1, 2.5, None, True], "é": {"b": "☃", "a": "x"}},
        execute_at=T0,
        priority=3,
    )
    assert fingerprint(pinned) == PINNED_FINGERPRINT
    assert fingerprint(request()) == PINNED_BARE


PINNED_FINGERPRINT = "eab18108d06fc5a05855268a99bcc180d631745a3bd31e50573551fc2edf6d61"
PINNED_BARE = "81adc11bbcfc822bbeed2d6abffdcee16a6b87b01b2a9a62c86a21483fa5a578"


def test_same_instant_in_another_offset_is_the_same_request() -> None:
    paris = timezone(timedelta(hours=1))
    kolkata = timezone(timedelta(hours=5, minutes=30))
    at_utc = request(execute_at=T0)
    at_paris = request(execute_at=T0.astimezone(paris))
    at_kolkata = request(execute_at=T0.astimezone(kolkata))
    assert at_paris.execute_at == at_utc.execute_at
    assert fingerprint(at_paris) == fingerprint(at_utc) == fingerprint(at_kolkata)


def test_input_key_order_does_not_matter() -> None:
    a = request(inputs={"name": "Ada", "times": 2, "nested": {"x": 1, "y": 2}})
    b = request(inputs={"nested": {"y": 2, "x": 1}, "times": 2, "name": "Ada"})
    assert fingerprint(a) == fingerprint(b)


def test_the_idempotency_key_is_not_part_of_the_fingerprint() -> None:
    # The key finds the earlier execution; the fingerprint then says whether the body matches.
    assert fingerprint(request(idempotency_key="a")) == fingerprint(request(idempotency_key="b"))


@pytest.mark.parametrize(
    "change",
    [
        {"inputs": {"name": "Bob"}},
        {"inputs": {"name": "Ada", "times": 1}},
        {"inputs": {"name": "Ada", "times": 1.5}},
        {"inputs": {}},
        {"priority": 1},
        {"definition_version": 1},
        {"definition_version": 2},
        {"definition_uri": "registry://jobs/other"},
        {"execute_at": T0 + timedelta(microseconds=1)},
        {"execute_at": T0 - timedelta(minutes=1)},
    ],
    ids=lambda change: ",".join(f"{k}={v}" for k, v in change.items()),
)
def test_a_different_request_has_a_different_fingerprint(change: dict[str, Any]) -> None:
    base = request(execute_at=T0, definition_version=None)
    assert fingerprint(dataclasses.replace(base, **change)) != fingerprint(base)


def test_absent_execute_at_differs_from_an_explicit_now() -> None:
    absent = request()
    explicit = request(execute_at=T0)
    assert fingerprint(absent) != fingerprint(explicit)
    # ...and stays the same whatever time it is: the request is taken as sent.
    assert fingerprint(absent) == fingerprint(request())


def test_integer_and_float_inputs_differ() -> None:
    assert fingerprint(request(inputs={"n": 1})) != fingerprint(request(inputs={"n": 1.0}))
    assert fingerprint(request(inputs={"n": 1})) != fingerprint(request(inputs={"n": True}))
    assert fingerprint(request(inputs={"n": 1})) != fingerprint(request(inputs={"n": "1"}))


# -- prepare_execution ----------------------------------------------------------------------------


def test_due_now_is_created_ready() -> None:
    new = prepare_execution(request(), definition(), "acme", T0)
    assert new.status is ExecutionStatus.READY
    assert new.execute_at == T0
    assert new.created_at == T0
    assert new.tenant == "acme"


def test_past_execute_at_is_created_ready() -> None:
    new = prepare_execution(request(execute_at=T0 - timedelta(hours=1)), definition(), "acme", T0)
    assert new.status is ExecutionStatus.READY
    assert new.execute_at == T0 - timedelta(hours=1)


def test_future_execute_at_is_created_scheduled() -> None:
    at = T0 + timedelta(microseconds=1)
    new = prepare_execution(request(execute_at=at), definition(), "acme", T0)
    assert new.status is ExecutionStatus.SCHEDULED
    assert new.execute_at == at


def test_bucket_is_the_minute_of_execute_at() -> None:
    at = datetime(2026, 3, 1, 12, 34, 56, 789_000, tzinfo=UTC)
    new = prepare_execution(request(execute_at=at), definition(), "acme", T0)
    assert new.bucket_start == datetime(2026, 3, 1, 12, 34, tzinfo=UTC)
    assert new.bucket_start <= new.execute_at < new.bucket_start + timedelta(minutes=1)


def test_bucket_of_an_offset_instant_is_the_same_instant_floored() -> None:
    at = datetime(2026, 3, 1, 18, 4, 56, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    new = prepare_execution(request(execute_at=at), definition(), "acme", T0)
    assert new.bucket_start == datetime(2026, 3, 1, 12, 34, tzinfo=UTC)


def test_shard_is_in_range_and_follows_the_id() -> None:
    for _ in range(200):
        new = prepare_execution(request(), definition(), "acme", T0)
        assert 0 <= new.shard_id < SHARD_COUNT
        assert new.shard_id == shard_id(new.execution_id)


def test_ids_are_uuid7_and_new_each_time() -> None:
    a = prepare_execution(request(), definition(), "acme", T0)
    b = prepare_execution(request(), definition(), "acme", T0)
    assert a.execution_id.version == 7
    assert a.execution_id != b.execution_id
    assert a.execution_id < b.execution_id


def test_defaults_are_applied_to_the_inputs() -> None:
    new = prepare_execution(request(inputs={"name": "Ada"}), definition(), "acme", T0)
    assert new.inputs == {"name": "Ada", "times": 1}
    given = prepare_execution(request(inputs={"name": "Ada", "times": 3}), definition(), "acme", T0)
    assert given.inputs == {"name": "Ada", "times": 3}


def test_max_attempts_comes_from_the_definition_retry_policy() -> None:
    new = prepare_execution(request(), definition(), "acme", T0)
    assert new.max_attempts == 4
    seven = definition(retry={"maxAttempts": 7})
    assert prepare_execution(request(), seven, "acme", T0).max_attempts == 7


def test_the_pinned_definition_and_request_fields_are_carried() -> None:
    d = definition(version=3)
    req = request(priority=-5, idempotency_key="key-1", execute_at=T0 + timedelta(minutes=5))
    new = prepare_execution(req, d, "globex", T0)
    assert new.definition_uri == URI
    assert new.definition_version == 3
    assert new.priority == -5
    assert new.idempotency_key == "key-1"
    assert new.request_fingerprint == fingerprint(req)


def test_invalid_inputs_name_every_bad_field_by_path() -> None:
    req = request(inputs={"times": "three", "colour": "red"})
    with pytest.raises(InvalidInput) as info:
        prepare_execution(req, definition(version=2), "acme", T0)
    paths = sorted(e.path for e in info.value.errors)
    assert paths == ["inputs.colour", "inputs.name", "inputs.times"]
    assert "registry://jobs/greet version 2" in info.value.message


def test_inputs_that_are_not_an_object_are_refused() -> None:
    req = request(inputs=["Ada"])
    with pytest.raises(InvalidInput) as info:
        prepare_execution(req, definition(), "acme", T0)
    assert [e.path for e in info.value.errors] == ["inputs", "inputs.name"]
    assert "expected object" in info.value.errors[0].message


@pytest.mark.parametrize(
    ("span", "words"),
    [
        (timedelta(days=400), "400 days"),
        (timedelta(days=1), "1 day"),
        (timedelta(hours=36), "36 hours"),
        (timedelta(minutes=90), "90 minutes"),
        (timedelta(seconds=90.5), "90.5 seconds"),
    ],
)
def test_horizons_are_described_in_words(span: timedelta, words: str) -> None:
    from tickwheel.domain.submission import describe

    assert describe(span) == words


def test_the_uri_checked_last_is_kept_only_when_it_was_well_formed() -> None:
    """A batch's items most often name one URI: the last well-formed one is not parsed again;
    a malformed one is refused every time, before or after it, and a bare name is refused
    unless the caller says which URI it stands for."""
    good, bad = "registry://jobs/greet", "registry://jobs/Greet"
    for uri in (good, bad, good, good, bad, bad, "", good, "greet"):
        found = shape_errors(request(definition_uri=uri))
        assert (found == []) is (uri == good), uri
    assert shape_errors(request(definition_uri="greet")) != []
    check_request_shape(request(definition_uri="greet"), T0, LIMITS, good)
    with pytest.raises(InvalidInput):
        check_request_shape(request(definition_uri=good), T0, LIMITS, bad)


def test_a_hostile_uri_after_a_well_formed_one_is_still_refused() -> None:
    """The URI kept from the last check never stands in for another: a lone surrogate, a NUL,
    a private address or a huge text right after a good URI is refused as on its own."""
    good = "registry://jobs/greet"
    hostile = [
        "registry://jobs/gr\ud800eet",
        "registry://jobs/greet\x00",
        "http://10.0.0.1/jobs/greet",
        "registry://jobs/" + "g" * 100_000,
        "registry://jobs/greet ",
    ]
    for uri in hostile:
        assert shape_errors(request(definition_uri=good)) == []
        assert ("definitionUri", URI_RULE) in shape_errors(request(definition_uri=uri)), uri
