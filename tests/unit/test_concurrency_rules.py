"""The concurrency block of a definition and a submission: its checks, its key's evaluation at
submit time, and the fingerprint rule (a request without it keeps its old fingerprint)."""

from __future__ import annotations

import pytest

from tests.factories import T0, definition, definition_doc
from tickwheel.domain.concurrency import Concurrency, ConcurrencySpec, evaluate, read_concurrency
from tickwheel.domain.definitions import (
    content_hash,
    definition_from_document,
    definition_to_document,
)
from tickwheel.domain.errors import ErrorList, InvalidInput
from tickwheel.domain.submission import SubmitRequest, fingerprint, prepare_execution

INPUTS = {"customer": "string", "region": {"type": "string", "default": "eu"}}


def problems(raw: object) -> list[tuple[str, str]]:
    errors = ErrorList()
    read_concurrency(raw, "concurrency", errors, INPUTS)
    return [(e.path, e.message) for e in errors.items]


def test_a_definition_reads_and_writes_its_concurrency() -> None:
    raw = {"key": "${{ inputs.customer }}", "limit": 2, "order": "none"}
    d = definition("sync", inputs=INPUTS, concurrency=raw)
    assert d.concurrency == ConcurrencySpec(limit=2, key="${{ inputs.customer }}", order="none")
    assert definition_to_document(d)["concurrency"] == raw
    assert definition_from_document(definition_to_document(d)) == d
    # Without it, the canonical document (and so every stored hash) is what it was.
    plain = definition("sync", inputs=INPUTS)
    assert "concurrency" not in definition_to_document(plain)
    assert content_hash(plain) != content_hash(d)


@pytest.mark.parametrize(
    ("raw", "where", "says"),
    [
        ("one", "concurrency", "must be a mapping"),
        ({"limit": 0}, "concurrency.limit", "from 1 to 1000"),
        ({"limit": True}, "concurrency.limit", "must be an integer"),
        ({}, "concurrency.limit", "must be an integer"),
        ({"limit": 1, "order": "lifo"}, "concurrency.order", "fifo, none"),
        ({"limit": 1, "key": ""}, "concurrency.key", "1 to 1000 characters"),
        ({"limit": 1, "key": "${{ inputs.nope }}"}, "concurrency.key", "names no input"),
        ({"limit": 1, "key": "${{ tasks.a.outputs.b }}"}, "concurrency.key", "not an input"),
        ({"limit": 1, "size": 3}, "concurrency.size", "unknown key"),
    ],
)
def test_bad_concurrency_is_refused_with_its_path(raw: object, where: str, says: str) -> None:
    found = problems(raw)
    assert any(path == where and says in message for path, message in found), found


def test_a_bad_block_fails_the_whole_definition() -> None:
    with pytest.raises(InvalidInput) as caught:
        definition_from_document(definition_doc(concurrency={"limit": -1}))
    assert [e.path for e in caught.value.errors] == ["concurrency.limit"]


def test_the_key_is_the_inputs_value_or_text_around_it() -> None:
    spec = ConcurrencySpec(limit=1, key="${{ inputs.customer }}")
    assert evaluate(spec, {"customer": "c-7"}) == Concurrency("c-7", 1, "fifo")
    assert evaluate(spec, {"customer": 7}).key == "7"
    around = ConcurrencySpec(limit=3, key="${{ inputs.region }}/${{ inputs.customer }}")
    assert evaluate(around, {"customer": "a", "region": "eu"}).key == "eu/a"
    assert evaluate(ConcurrencySpec(limit=4), {}) == Concurrency("", 4, "fifo")
    with pytest.raises(ValueError, match="cannot be evaluated"):
        evaluate(spec, {})
    with pytest.raises(ValueError, match="empty"):
        evaluate(spec, {"customer": ""})
    with pytest.raises(ValueError, match="longer than 255"):
        evaluate(spec, {"customer": "x" * 256})


def test_submit_evaluates_the_definitions_key_and_a_submission_overrides_it() -> None:
    d = definition("sync", inputs=INPUTS, concurrency={"key": "${{ inputs.customer }}", "limit": 1})
    request = SubmitRequest("registry://jobs/sync", {"customer": "acme-1"})
    assert prepare_execution(request, d, "t", T0).concurrency == Concurrency("acme-1", 1, "fifo")
    override = ConcurrencySpec(limit=5, key="${{ inputs.region }}", order="none")
    mine = SubmitRequest("registry://jobs/sync", {"customer": "acme-1"}, concurrency=override)
    assert prepare_execution(mine, d, "t", T0).concurrency == Concurrency("eu", 5, "none")
    plain = SubmitRequest("registry://jobs/greet", {"name": "x"})
    assert prepare_execution(plain, definition(), "t", T0).concurrency is None
    # A key naming an input the submission's definition does not have is the caller's error.
    wrong = SubmitRequest(
        "registry://jobs/greet", {"name": "x"}, concurrency=ConcurrencySpec(1, "${{ inputs.no }}")
    )
    with pytest.raises(InvalidInput) as caught:
        prepare_execution(wrong, definition(), "t", T0)
    assert [e.path for e in caught.value.errors] == ["concurrency.key"]


def test_the_fingerprint_changes_only_when_concurrency_is_given() -> None:
    plain = SubmitRequest("registry://jobs/sync", {"customer": "a"})
    given = SubmitRequest("registry://jobs/sync", {"customer": "a"}, concurrency=ConcurrencySpec(2))
    same = SubmitRequest("registry://jobs/sync", {"customer": "a"})
    assert fingerprint(plain) == fingerprint(same)
    assert fingerprint(given) != fingerprint(plain)


def test_an_xml_definition_gives_it_as_attributes() -> None:
    from tickwheel.domain.definition_files import parse_definition

    text = """<definition><name>sync</name><version>1</version>
      <inputs><input name="customer" type="string"/></inputs>
      <execution type="python" entrypoint="tickwheel.examples.jobs:greet"/>
      <concurrency key="${{ inputs.customer }}" limit="2" order="none"/>
    </definition>"""
    d = parse_definition(text, "xml")
    assert d.concurrency == ConcurrencySpec(limit=2, key="${{ inputs.customer }}", order="none")
