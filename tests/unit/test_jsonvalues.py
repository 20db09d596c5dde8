"""The limits on stored JSON values, and the defensive reading of stored ones."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tickwheel.domain.jsonvalues import (
    MAX_DEPTH,
    TOO_DEEP,
    UNREADABLE,
    load_readable,
    problems,
    readable,
    readable_object,
)


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": [value]}
    return value


def test_a_clean_value_has_no_problems_and_is_read_as_is() -> None:
    value = {"a": [1, 2.5, "é😀", None, True, {"b": 2**63 - 1}], "c": nested(MAX_DEPTH // 2 - 1)}
    assert problems(value, "inputs") == []
    assert readable(value) is value


@pytest.mark.parametrize(
    ("value", "where", "says"),
    [
        ({"a": "x\x00"}, "inputs.a", "NUL"),
        ({"a": ["\udc80"]}, "inputs.a.0", "lone surrogate"),
        ({"a\x00": 1}, "inputs", "key"),
        ({"n": -(2**63) - 1}, "inputs.n", "64-bit"),
        ({"f": float("nan")}, "inputs.f", "finite"),
        ({"s": {1, 2}}, "inputs.s", "not a JSON value"),
    ],
)
def test_each_problem_is_named_by_its_path(value: Any, where: str, says: str) -> None:
    [(path, message)] = problems(value, "inputs")
    assert path == where and says in message


def test_nesting_is_checked_without_recursion_and_reported_once() -> None:
    found = problems(nested(100_000), "inputs")
    assert len(found) == 1 and "nested too deep" in found[0][1]


def test_a_stored_value_is_made_readable() -> None:
    shown = readable({"name": "a\ud800b\x00", "deep": nested(500)})
    assert shown["name"] == "a\ufffdb\ufffd"
    assert TOO_DEEP in json.dumps(shown, ensure_ascii=False)
    json.dumps(shown, ensure_ascii=False).encode("utf-8")  # encodes: no surrogate left


@pytest.mark.parametrize("text", ["{not json", "[" * 100_000 + "]" * 100_000])
def test_stored_text_that_does_not_parse_is_marked_not_raised(text: str) -> None:
    assert load_readable(text) == UNREADABLE
    assert readable_object(load_readable(text)) == {"unreadable": UNREADABLE}
