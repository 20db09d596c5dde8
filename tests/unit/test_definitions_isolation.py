"""The definition fields of crash isolation (issue 12, part 5): ``execution.isolation`` of python
jobs and ``retry.maxLostAttempts``; in every format, refused clearly when bad, and absent from the
canonical document when left at their defaults (so that stored definitions keep their hash)."""

from __future__ import annotations

from typing import Any

import pytest

from tickwheel.domain.definition_files import parse_definition
from tickwheel.domain.definitions import (
    MAX_LOST_ATTEMPTS,
    PythonExecution,
    RetryPolicy,
    content_hash,
    definition_from_document,
    definition_to_document,
)
from tickwheel.domain.errors import InvalidInput


def doc(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "greet",
        "version": 1,
        "execution": {"type": "python", "entrypoint": "tickwheel.examples.jobs:greet"},
    }
    base.update(overrides)
    return base


def test_defaults_in_process_and_five_lost_attempts() -> None:
    d = definition_from_document(doc())
    assert d.execution == PythonExecution("tickwheel.examples.jobs:greet", "none")
    assert d.retry.max_lost_attempts == MAX_LOST_ATTEMPTS == 5
    canonical = definition_to_document(d)
    assert canonical["execution"] == {"type": "python", "entrypoint": d.execution.entrypoint}
    assert "maxLostAttempts" not in canonical["retry"]
    # The hash of a definition without the new fields is what it was before they existed.
    assert content_hash(d) == "3576c7a4327846436cdb4b74ca4b4839d549ec2fb7016153724585697455539c"


def test_the_fields_in_yaml_json_and_xml() -> None:
    yaml_text = """
name: greet
version: 1
execution: {type: python, entrypoint: "pkg.mod:run", isolation: process}
retry: {maxAttempts: 1, maxLostAttempts: 2}
"""
    xml_text = """<definition><name>greet</name><version>1</version>
<execution type="python" entrypoint="pkg.mod:run" isolation="process"/>
<retry maxAttempts="1" maxLostAttempts="2"/></definition>"""
    json_text = (
        '{"name": "greet", "version": 1, "execution": {"type": "python",'
        ' "entrypoint": "pkg.mod:run", "isolation": "process"},'
        ' "retry": {"maxAttempts": 1, "maxLostAttempts": 2}}'
    )
    parsed = [parse_definition(t, f) for t, f in ((yaml_text, "yaml"), (xml_text, "xml"))]
    parsed.append(parse_definition(json_text, "json"))
    for d in parsed:
        assert d.execution == PythonExecution("pkg.mod:run", "process")
        assert d.retry == RetryPolicy(max_attempts=1, max_lost_attempts=2)
        canonical = definition_to_document(d)
        assert canonical["execution"]["isolation"] == "process"
        assert canonical["retry"]["maxLostAttempts"] == 2
        # The canonical document reads back into the same definition.
        assert definition_from_document(canonical) == d
    assert len({content_hash(d) for d in parsed}) == 1
    assert content_hash(parsed[0]) != content_hash(definition_from_document(doc()))


@pytest.mark.parametrize(
    ("overrides", "path", "message"),
    [
        (
            {"execution": {"type": "python", "entrypoint": "a:b", "isolation": "thread"}},
            "execution.isolation",
            "must be one of none, process",
        ),
        (
            {"execution": {"type": "python", "entrypoint": "a:b", "isolation": True}},
            "execution.isolation",
            "must be one of none, process",
        ),
        (
            {"execution": {"type": "command", "argv": ["true"], "isolation": "process"}},
            "execution.isolation",
            "unknown key 'isolation'",
        ),
        ({"retry": {"maxLostAttempts": 0}}, "retry.maxLostAttempts", "must be at least 1"),
        ({"retry": {"maxLostAttempts": "5"}}, "retry.maxLostAttempts", "must be an integer"),
    ],
)
def test_bad_values_are_named(overrides: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        definition_from_document(doc(**overrides))
    found = {e.path: e.message for e in exc.value.errors}
    assert path in found, found
    assert message in found[path]
