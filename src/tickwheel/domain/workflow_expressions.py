"""``${{ ... }}`` expressions in a workflow task's inputs: finding them and resolving them.

Two references exist: ``${{ inputs.x }}`` (a workflow input) and ``${{ tasks.t.outputs.y }}``
(an output of an upstream task). A string that is exactly one expression is replaced by the
referenced value whatever its type (whole-value substitution); a string with text around its
expressions interpolates them (strings as they are, other values as JSON). Expressions are found
in strings at any depth of lists and objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
_INPUT_REF = re.compile(r"inputs\.([A-Za-z_][A-Za-z0-9_]*)")
_OUTPUT_REF = re.compile(r"tasks\.([a-z0-9][a-z0-9_.-]{0,127}?)\.outputs\.([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class InputRef:
    """``${{ inputs.name }}``"""

    name: str


@dataclass(frozen=True)
class OutputRef:
    """``${{ tasks.task.outputs.name }}``"""

    task: str
    name: str


Ref = InputRef | OutputRef


@dataclass(frozen=True)
class Found:
    """One expression found in a value: where (dotted path), its text, what it references
    (None when it is not a valid reference), and whether it is the whole string."""

    path: str
    text: str
    ref: Ref | None
    whole: bool


def parse_ref(text: str) -> Ref | None:
    body = text.strip()
    if m := _INPUT_REF.fullmatch(body):
        return InputRef(m.group(1))
    if m := _OUTPUT_REF.fullmatch(body):
        return OutputRef(m.group(1), m.group(2))
    return None


def find_expressions(value: Any, path: str) -> Iterator[Found]:
    """Every expression in ``value`` (at any depth), located by its dotted path."""
    if isinstance(value, str):
        matches = list(EXPRESSION.finditer(value))
        whole = len(matches) == 1 and matches[0].span() == (0, len(value))
        for m in matches:
            yield Found(path, m.group(0), parse_ref(m.group(1)), whole)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from find_expressions(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from find_expressions(item, f"{path}.{key}")


def has_expressions(value: Any) -> bool:
    return next(find_expressions(value, ""), None) is not None


class UnresolvedReference(LookupError):
    """A reference whose value is not there (an output the upstream did not produce)."""


def resolve(value: Any, inputs: Mapping[str, Any], outputs: Mapping[str, Mapping[str, Any]]) -> Any:
    """``value`` with every expression replaced; ``outputs`` maps task name to its output.

    Raises UnresolvedReference naming the first reference without a value."""
    if isinstance(value, str):
        matches = list(EXPRESSION.finditer(value))
        if len(matches) == 1 and matches[0].span() == (0, len(value)):
            return _lookup(matches[0].group(1), inputs, outputs)
        return EXPRESSION.sub(lambda m: _text(_lookup(m.group(1), inputs, outputs)), value)
    if isinstance(value, list):
        return [resolve(item, inputs, outputs) for item in value]
    if isinstance(value, dict):
        return {key: resolve(item, inputs, outputs) for key, item in value.items()}
    return value


def _lookup(text: str, inputs: Mapping[str, Any], outputs: Mapping[str, Mapping[str, Any]]) -> Any:
    ref = parse_ref(text)
    if isinstance(ref, InputRef) and ref.name in inputs:
        return inputs[ref.name]
    if isinstance(ref, OutputRef) and ref.name in outputs.get(ref.task, {}):
        return outputs[ref.task][ref.name]
    raise UnresolvedReference(f"${{{{{text}}}}} has no value")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
