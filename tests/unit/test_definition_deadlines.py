"""A definition's ``startBy`` and ``deadline``: durations after executeAt that become the limits
of a submission naming none of its own (docs/flow-control.md); read from YAML and XML, checked
field by field, and absent from the canonical form of every definition without them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.factories import T0, definition_doc
from tickwheel.domain.definition_files import parse_definition
from tickwheel.domain.definitions import (
    content_hash,
    definition_from_document,
    definition_to_document,
)
from tickwheel.domain.errors import InvalidInput
from tickwheel.domain.submission import SubmitRequest, prepare_execution

YAML = """
name: report
version: 1
execution: {type: python, entrypoint: "tickwheel.examples.jobs:add"}
startBy: 5m
deadline: 3600
"""


def test_durations_are_read_and_kept_in_the_canonical_form() -> None:
    d = parse_definition(YAML, "yaml")
    assert (d.start_within, d.deadline_within) == (300.0, 3600.0)
    xml = (
        '<definition><name>report</name><version>1</version><execution type="python" '
        'entrypoint="tickwheel.examples.jobs:add"/><startBy>5m</startBy>'
        "<deadline>3600</deadline></definition>"
    )
    assert parse_definition(xml, "xml") == d
    doc = definition_to_document(d)
    assert (doc["startBy"], doc["deadline"]) == (300.0, 3600.0)
    plain = definition_from_document(definition_doc())
    assert "startBy" not in definition_to_document(plain)
    assert content_hash(plain) != content_hash(d)


def test_a_submission_without_limits_gets_the_definitions() -> None:
    d = parse_definition(YAML, "yaml")
    at = T0 + timedelta(minutes=10)
    made = prepare_execution(SubmitRequest(d.uri, {}, execute_at=at), d, "acme", T0)
    assert made.start_by == at + timedelta(minutes=5)
    assert made.deadline == at + timedelta(hours=1)
    own = T0 + timedelta(minutes=11)
    request = SubmitRequest(d.uri, {}, execute_at=at, start_by=own)
    made = prepare_execution(request, d, "acme", T0)
    assert made.start_by == own and made.deadline == at + timedelta(hours=1)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("startBy", "soon", "number of seconds"),
        ("startBy", 0, "above 0"),
        ("deadline", "2026-03-01T12:00:00Z", "number of seconds"),
        ("deadline", "9999d", "number of seconds"),
        ("deadline", 401 * 86400, "at most 400 days"),
    ],
)
def test_a_bad_duration_names_its_field(key: str, value: object, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        definition_from_document({**definition_doc(), key: value})
    found = {e.path: e.message for e in caught.value.errors}
    assert key in found and message in found[key], found
