"""The one predicate of a plain request (``submission.plain_request``), asked by every short way
a submission may take: ``check_request_shape``'s early return and a batch's ``PlainRun``. Each
field of ``SubmitRequest`` is decided here: a value that makes a request not plain, or listed
as irrelevant to every short way. A new field fails these tests until it is decided."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tickwheel.domain.concurrency import spec_of
from tickwheel.domain.definition_refs import URI_RULE
from tickwheel.domain.errors import InvalidInput
from tickwheel.domain.jsonvalues import VERSION_MAX
from tickwheel.domain.submission import (
    IDEMPOTENCY_KEY_MAX,
    PRIORITY_MAX,
    PRIORITY_MIN,
    SubmitLimits,
    SubmitRequest,
    check_request_shape,
    plain_request,
)

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
URI = "registry://jobs/greet"
PLAIN = SubmitRequest(definition_uri=URI, idempotency_key="k", priority=3, definition_version=2)


class _Str(str):
    """A str subclass: not of a plain type (its comparisons could be anything)."""


NOT_PLAIN: dict[str, list[Any]] = {
    "definition_uri": [_Str(URI), None],
    "inputs": [{"name": "a"}, [], {"": None}],
    "definition_version": [0, VERSION_MAX + 1, True, 1.0, "1"],
    "execute_at": [NOW, NOW.replace(tzinfo=None)],
    "priority": [PRIORITY_MIN - 1, PRIORITY_MAX + 1, True, 3.0, "3"],
    "idempotency_key": ["", "x" * (IDEMPOTENCY_KEY_MAX + 1), "a\nb", _Str("k"), 7],
    "start_by": [NOW + timedelta(hours=1)],
    "deadline": [NOW + timedelta(hours=1)],
    "concurrency": [spec_of({"key": "x", "limit": 1})],
    "trace_context": [{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}],
}
"""For each field the short ways read: values (valid or not) that make a request take the
whole way. A plain request's item is made from another's, so a field that may change the
item or its check belongs here."""

IRRELEVANT: set[str] = set()
"""Fields that neither change a request's item nor its check, whatever their value: none yet.
A field listed here is copied from the run's first item for every plain request after it."""


def _fields() -> set[str]:
    return {f.name for f in dataclasses.fields(SubmitRequest)}


def test_every_field_of_a_request_is_decided() -> None:
    undecided = _fields() - set(NOT_PLAIN) - IRRELEVANT
    assert not undecided, (
        f"decide {sorted(undecided)}: add a check to plain_request and its values to NOT_PLAIN,"
        " or list it in IRRELEVANT (then PlainRun copies it from the run's first item)"
    )
    assert not set(NOT_PLAIN) & IRRELEVANT
    assert set(NOT_PLAIN) | IRRELEVANT == _fields()  # no stale name either


def test_a_request_of_defaults_and_plain_values_is_plain() -> None:
    assert plain_request(SubmitRequest(definition_uri=URI))
    assert plain_request(PLAIN)
    for key in ("x" * IDEMPOTENCY_KEY_MAX, "é☃", None):
        assert plain_request(dataclasses.replace(PLAIN, idempotency_key=key))
    for priority in (PRIORITY_MIN, PRIORITY_MAX):
        assert plain_request(dataclasses.replace(PLAIN, priority=priority))
    assert plain_request(dataclasses.replace(PLAIN, definition_version=None))


@pytest.mark.parametrize(
    ("name", "value"), [(n, v) for n, values in NOT_PLAIN.items() for v in values]
)
def test_a_value_of_a_decided_field_makes_a_request_not_plain(name: str, value: Any) -> None:
    assert not plain_request(dataclasses.replace(PLAIN, **{name: value}))


@pytest.mark.parametrize("name", sorted(_fields() - IRRELEVANT))
def test_a_field_the_predicate_reads_is_read_whatever_its_value(name: str) -> None:
    """Any object at all in a field the predicate does not read would leave the request plain:
    a field added without its check fails here, even before NOT_PLAIN is updated."""
    assert not plain_request(dataclasses.replace(PLAIN, **{name: object()}))


@pytest.mark.parametrize("uri", ["", "greet", "registry://jobs/", "registry://jobs/a/b"])
def test_a_malformed_uri_is_refused_when_no_uri_is_known(uri: str) -> None:
    """Nothing else known: the URI is read. (The check once kept the last well-formed URI in
    the module, starting from ``""``: an empty URI passed the check in a new process.)"""
    with pytest.raises(InvalidInput) as refused:
        check_request_shape(SubmitRequest(definition_uri=uri), NOW, SubmitLimits())
    assert ("definitionUri", URI_RULE) in [(d["path"], d["message"]) for d in refused.value.details]


def test_a_uri_known_well_formed_is_not_read_again_and_another_is() -> None:
    limits = SubmitLimits()
    check_request_shape(PLAIN, NOW, limits, None, URI)  # the early return
    check_request_shape(dataclasses.replace(PLAIN, inputs={"n": 1}), NOW, limits, None, URI)
    with pytest.raises(InvalidInput):  # well formed is what the caller says: "" is not kept
        check_request_shape(SubmitRequest(definition_uri=""), NOW, limits, None, URI)
    with pytest.raises(InvalidInput):
        check_request_shape(SubmitRequest(definition_uri="bad", priority=500), NOW, limits)
