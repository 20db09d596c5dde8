"""Workflow Definitions: the model, parsing (YAML or JSON) and the structural checks.

A workflow is a DAG of tasks; each task names a Job Definition (``registry://jobs/<name>``,
optionally ``definitionVersion``), its ``inputs`` (literals or ``${{ }}`` expressions),
``dependsOn`` and a ``triggerRule``. ``workflow_from_document`` checks everything that needs no
stored definition (names, references, cycles); ``workflow_checks.check_definitions`` checks the
rest against the stored Job Definitions. Both raise InvalidInput naming each bad field.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tickwheel.domain.definition_files import _load_json, _load_yaml, _text
from tickwheel.domain.definition_refs import NAME, URI_RULE, name_of, uri_of
from tickwheel.domain.definitions import _canonical_json, _diff
from tickwheel.domain.errors import BadRequest, ErrorList, InvalidInput
from tickwheel.domain.fieldtypes import (
    FieldSpec,
    check_keys,
    describe,
    field_to_document,
    json_type_name,
    parse_fields,
    read_positive_int,
    read_str,
)
from tickwheel.domain.workflow_expressions import InputRef, OutputRef, find_expressions

_TOP_KEYS = ("name", "version", "description", "inputs", "tasks")
_TASK_KEYS = ("name", "definition", "definitionVersion", "inputs", "dependsOn", "triggerRule")
MAX_TASKS = 1000


class TriggerRule(StrEnum):
    """When a task whose upstream tasks have all finished runs (otherwise it is SKIPPED)."""

    ALL_SUCCESS = "all_success"  # every upstream task SUCCEEDED
    ALL_DONE = "all_done"  # always, whatever the upstream outcome (clean-up)
    ONE_FAILED = "one_failed"  # at least one direct upstream task FAILED


@dataclass(frozen=True, kw_only=True)
class WorkflowTask:
    name: str
    definition: str  # the Job Definition's name
    definition_version: int | None = None  # None: the latest at submission
    inputs: Mapping[str, Any] = field(default_factory=dict)
    depends_on: tuple[str, ...] = ()
    trigger_rule: TriggerRule = TriggerRule.ALL_SUCCESS

    @property
    def definition_uri(self) -> str:
        return uri_of(self.definition)


@dataclass(frozen=True, kw_only=True)
class Workflow:
    """A versioned Workflow Definition; immutable once stored. Tasks keep document order."""

    name: str
    version: int
    description: str = ""
    inputs: Mapping[str, FieldSpec] = field(default_factory=dict)
    tasks: tuple[WorkflowTask, ...] = ()

    def task(self, name: str) -> WorkflowTask:
        return next(t for t in self.tasks if t.name == name)

    def upstream(self, name: str) -> frozenset[str]:
        """Every task ``name`` depends on, directly or transitively."""
        deps = {t.name: t.depends_on for t in self.tasks}
        seen: set[str] = set()
        stack = list(deps.get(name, ()))
        while stack:
            dep = stack.pop()
            if dep not in seen:
                seen.add(dep)
                stack.extend(deps.get(dep, ()))
        return frozenset(seen)

    def downstream(self, name: str) -> frozenset[str]:
        """Every task that depends on ``name``, directly or transitively."""
        return frozenset(t.name for t in self.tasks if name in self.upstream(t.name))


# -- parsing: text -> document -> model ----------------------------------------------------------


def parse_workflow(data: str | bytes, fmt: str) -> Workflow:
    """Parse a Workflow Definition's text in ``fmt`` (yaml or json); BadRequest when unreadable."""
    kind = fmt.lower()
    if kind == "json":
        return workflow_from_document(_load_json(_text(data, "JSON")))
    if kind == "yaml":
        return workflow_from_document(_load_yaml(_text(data, "YAML")))
    raise BadRequest(f"unsupported workflow format {fmt!r}; supported: yaml, json")


def workflow_from_document(doc: Any) -> Workflow:
    errors = ErrorList()
    if not isinstance(doc, Mapping):
        errors.add("", f"a workflow must be a mapping at the top level, got {json_type_name(doc)}")
        errors.raise_if_any("invalid workflow")
    check_keys(doc, _TOP_KEYS, "", errors)
    name = read_str(doc.get("name"), "name", errors)
    if name is not None and not NAME.fullmatch(name):
        errors.add("name", f"must match ^{NAME.pattern}$; got {describe(name)}")
    version = read_positive_int(doc.get("version"), "version", errors, None)
    description = doc.get("description") or ""
    if not isinstance(description, str):
        errors.add("description", f"must be a string, got {describe(description)}")
    inputs = parse_fields(doc.get("inputs"), "inputs", errors)
    tasks = _read_tasks(doc.get("tasks"), errors)
    if not errors.items:
        _check_graph(tasks, inputs, errors)
    if errors.items or name is None or version is None:
        count = len(errors.items)
        what = f"workflow {name!r}" if name else "workflow"
        raise InvalidInput(f"invalid {what}: {count} problem{'s' * (count != 1)}", errors.items)
    return Workflow(name=name, version=version, description=description, inputs=inputs, tasks=tasks)


def _read_tasks(raw: Any, errors: ErrorList) -> tuple[WorkflowTask, ...]:
    if not isinstance(raw, list) or not raw:
        errors.add("tasks", "is required: a non-empty list of tasks")
        return ()
    if len(raw) > MAX_TASKS:
        errors.add("tasks", f"at most {MAX_TASKS} tasks, got {len(raw)}")
        return ()
    tasks: list[WorkflowTask] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        task = _read_task(item, f"tasks[{i}]", errors)
        if task is None:
            continue
        if task.name in seen:
            errors.add(f"tasks[{i}].name", f"duplicate task name {task.name!r}")
        seen.add(task.name)
        tasks.append(task)
    return tuple(tasks)


def _read_task(raw: Any, path: str, errors: ErrorList) -> WorkflowTask | None:
    if not isinstance(raw, Mapping):
        errors.add(path, f"must be a mapping, got {json_type_name(raw)}")
        return None
    before = len(errors.items)
    check_keys(raw, _TASK_KEYS, path, errors)
    name = read_str(raw.get("name"), f"{path}.name", errors)
    if name is not None and not NAME.fullmatch(name):
        errors.add(f"{path}.name", f"must match ^{NAME.pattern}$; got {describe(name)}")
    uri = read_str(raw.get("definition"), f"{path}.definition", errors)
    definition = name_of(uri) if uri is not None else None
    if uri is not None and definition is None:
        errors.add(f"{path}.definition", f"{URI_RULE}; got {uri!r}")
    version = None
    if raw.get("definitionVersion") is not None:
        version = read_positive_int(
            raw["definitionVersion"], f"{path}.definitionVersion", errors, None
        )
    inputs = raw.get("inputs") or {}
    if not isinstance(inputs, Mapping):
        errors.add(f"{path}.inputs", f"must be a mapping, got {json_type_name(inputs)}")
    depends = raw.get("dependsOn") or []
    if not isinstance(depends, list) or not all(isinstance(d, str) for d in depends):
        errors.add(f"{path}.dependsOn", "must be a list of task names")
    elif len(set(depends)) != len(depends):
        errors.add(f"{path}.dependsOn", "lists a task more than once")
    rule = raw.get("triggerRule") or TriggerRule.ALL_SUCCESS.value
    if rule not in {r.value for r in TriggerRule}:
        allowed = ", ".join(r.value for r in TriggerRule)
        errors.add(f"{path}.triggerRule", f"must be one of {allowed}; got {describe(rule)}")
    if len(errors.items) != before or name is None or definition is None:
        return None
    return WorkflowTask(
        name=name,
        definition=definition,
        definition_version=version,
        inputs=dict(inputs),
        depends_on=tuple(depends),
        trigger_rule=TriggerRule(rule),
    )


def _check_graph(
    tasks: tuple[WorkflowTask, ...], inputs: Mapping[str, FieldSpec], errors: ErrorList
) -> None:
    index = {t.name: i for i, t in enumerate(tasks)}
    for i, task in enumerate(tasks):
        for dep in task.depends_on:
            if dep not in index:
                errors.add(f"tasks[{i}].dependsOn", f"unknown task {dep!r}")
            elif dep == task.name:
                errors.add(f"tasks[{i}].dependsOn", f"task {dep!r} depends on itself")
    if errors.items:
        return
    cycle = find_cycle(tasks)
    if cycle is not None:
        errors.add(f"tasks[{index[cycle[0]]}].dependsOn", "dependency cycle: " + " -> ".join(cycle))
        return
    workflow = Workflow(name="x", version=1, tasks=tasks)
    for i, task in enumerate(tasks):
        upstream = workflow.upstream(task.name)
        for found in find_expressions(dict(task.inputs), f"tasks[{i}].inputs"):
            ref = found.ref
            if ref is None:
                errors.add(
                    found.path,
                    f"unknown expression {found.text}: use ${{{{ inputs.<name> }}}}"
                    " or ${{ tasks.<task>.outputs.<name> }}",
                )
            elif isinstance(ref, InputRef) and ref.name not in inputs:
                errors.add(found.path, f"{found.text} names an undeclared workflow input")
            elif isinstance(ref, OutputRef) and ref.task not in index:
                errors.add(found.path, f"{found.text} names an unknown task {ref.task!r}")
            elif isinstance(ref, OutputRef) and ref.task not in upstream:
                errors.add(
                    found.path,
                    f"{found.text}: task {ref.task!r} is not upstream of {task.name!r}"
                    " (add it to dependsOn)",
                )


def find_cycle(tasks: tuple[WorkflowTask, ...]) -> list[str] | None:
    """One dependency cycle as task names, first name repeated last; None when acyclic."""
    deps = {t.name: t.depends_on for t in tasks}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in deps:
        if state.get(start):
            continue
        path: list[str] = [start]
        stack = [iter(deps[start])]
        state[start] = 1
        while stack:
            dep = next(stack[-1], None)
            if dep is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            elif dep in deps and not state.get(dep):
                state[dep] = 1
                path.append(dep)
                stack.append(iter(deps[dep]))
    return None


def topological_order(workflow: Workflow) -> list[str]:
    """Task names, each after all its dependencies (document order among equals)."""
    done: list[str] = []
    placed: set[str] = set()
    while len(done) < len(workflow.tasks):
        for task in workflow.tasks:
            if task.name not in placed and all(d in placed for d in task.depends_on):
                done.append(task.name)
                placed.add(task.name)
    return done


# -- the canonical document, its hash, and differences --------------------------------------------


def workflow_to_document(w: Workflow) -> dict[str, Any]:
    return {
        "name": w.name,
        "version": w.version,
        "description": w.description,
        "inputs": {name: field_to_document(spec) for name, spec in w.inputs.items()},
        "tasks": [
            {
                "name": t.name,
                "definition": t.definition_uri,
                "definitionVersion": t.definition_version,
                "inputs": dict(t.inputs),
                "dependsOn": list(t.depends_on),
                "triggerRule": t.trigger_rule.value,
            }
            for t in w.tasks
        ],
    }


def workflow_content_hash(w: Workflow) -> str:
    return hashlib.sha256(_canonical_json(workflow_to_document(w)).encode()).hexdigest()


def diff_workflows(a: Workflow, b: Workflow) -> list[str]:
    """Sorted dotted paths that differ between two workflows (tasks compared by name)."""
    paths: list[str] = []

    def keyed(w: Workflow) -> dict[str, Any]:
        doc = workflow_to_document(w)
        doc["tasks"] = {t["name"]: t for t in doc["tasks"]}
        return doc

    _diff(keyed(a), keyed(b), "", paths)
    return sorted(paths)
