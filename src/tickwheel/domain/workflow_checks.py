"""The checks of a workflow against the stored Job Definitions its tasks name.

Pure: the caller passes ``lookup(name, version)`` (version None: the latest), typically a dict's
``get`` over definitions it fetched first. Every problem is named by its dotted path, so one 422
lists them all: unknown definitions, inputs a definition does not declare or that are missing,
references to outputs a task's definition does not declare, literals and references whose type
does not fit the input they feed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tickwheel.domain.definitions import Definition
from tickwheel.domain.errors import ErrorList
from tickwheel.domain.fieldtypes import FieldSpec, FieldType, value_problem
from tickwheel.domain.workflow_expressions import InputRef, OutputRef, find_expressions
from tickwheel.domain.workflows import Workflow

DefinitionLookup = Callable[[str, int | None], Definition | None]

_TEXT_TYPES = frozenset({FieldType.STRING, FieldType.DATE, FieldType.DATETIME, FieldType.URI})


def check_definitions(workflow: Workflow, lookup: DefinitionLookup) -> dict[str, Definition]:
    """The definition of each task, by task name; raises InvalidInput listing every problem."""
    errors = ErrorList()
    found: dict[str, Definition] = {}
    for i, task in enumerate(workflow.tasks):
        definition = lookup(task.definition, task.definition_version)
        if definition is None:
            which = f" version {task.definition_version}" if task.definition_version else ""
            errors.add(f"tasks[{i}].definition", f"unknown definition {task.definition_uri}{which}")
        else:
            found[task.name] = definition
    for i, task in enumerate(workflow.tasks):
        if task.name in found:
            _check_task_inputs(workflow, i, found, errors)
    errors.raise_if_any(f"workflow {workflow.name!r} does not fit its job definitions")
    return found


def _check_task_inputs(
    workflow: Workflow, i: int, found: Mapping[str, Definition], errors: ErrorList
) -> None:
    task = workflow.tasks[i]
    specs = found[task.name].inputs
    path = f"tasks[{i}].inputs"
    for name, value in task.inputs.items():
        if name not in specs:
            errors.add(f"{path}.{name}", f"not declared by {task.definition_uri}")
            continue
        problem = _value_fits(workflow, specs[name], value, f"{path}.{name}", found, errors)
        if problem:
            errors.add(f"{path}.{name}", problem)
    for name, spec in specs.items():
        if name not in task.inputs and spec.required and spec.default is None:
            errors.add(f"{path}.{name}", f"is required ({spec.type}) by {task.definition_uri}")


def _value_fits(
    workflow: Workflow,
    spec: FieldSpec,
    value: Any,
    path: str,
    found: Mapping[str, Definition],
    errors: ErrorList,
) -> str | None:
    """What is wrong with ``value`` as the input ``spec`` (None when it fits or cannot be told
    before the run). Unknown output references are added to ``errors`` directly."""
    expressions = list(find_expressions(value, path))
    for expr in expressions:
        ref = expr.ref
        if isinstance(ref, OutputRef) and ref.task in found:
            outputs = found[ref.task].outputs
            if ref.name not in outputs:
                declared = ", ".join(sorted(outputs)) or "none"
                errors.add(
                    expr.path,
                    f"{expr.text}: {found[ref.task].uri} declares no output {ref.name!r}"
                    f" (declared: {declared})",
                )
                return None
    if not expressions:
        return value_problem(spec.type, value)
    if len(expressions) == 1 and expressions[0].whole and expressions[0].path == path:
        source = _source_type(workflow, expressions[0].ref, found)
        if source is None or _compatible(source, spec.type):
            return None
        return f"expected {spec.type}, but {expressions[0].text} is {source}"
    if isinstance(value, str) and spec.type not in _TEXT_TYPES:
        return f"expected {spec.type}, but text with expressions is a string"
    return None


def _source_type(
    workflow: Workflow, ref: InputRef | OutputRef | None, found: Mapping[str, Definition]
) -> FieldType | None:
    if isinstance(ref, InputRef) and ref.name in workflow.inputs:
        return workflow.inputs[ref.name].type
    if isinstance(ref, OutputRef) and ref.task in found:
        spec = found[ref.task].outputs.get(ref.name)
        return None if spec is None else spec.type
    return None


def _compatible(source: FieldType, target: FieldType) -> bool:
    """Whether every value of type ``source`` is a valid ``target``."""
    if source is target:
        return True
    if target is FieldType.NUMBER:
        return source is FieldType.INTEGER
    # Dates, datetimes and URIs are strings; the reverse cannot be known before the run.
    return target is FieldType.STRING and source in _TEXT_TYPES
