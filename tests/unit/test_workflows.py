"""Workflow Definitions (domain/workflows.py, workflow_checks.py, workflow_expressions.py):
parsing, structural 422s, checks against Job Definitions, expressions."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tickwheel.domain.definitions import Definition, definition_from_document
from tickwheel.domain.errors import BadRequest, InvalidInput
from tickwheel.domain.workflow_checks import check_definitions
from tickwheel.domain.workflow_expressions import (
    InputRef,
    OutputRef,
    UnresolvedReference,
    parse_ref,
    resolve,
)
from tickwheel.domain.workflows import (
    TriggerRule,
    diff_workflows,
    find_cycle,
    parse_workflow,
    topological_order,
    workflow_content_hash,
    workflow_from_document,
    workflow_to_document,
)

DIAMOND = """
name: nightly-report
version: 1
inputs: {day: {type: date, required: true}}
tasks:
  - name: extract
    definition: registry://jobs/extract
    inputs: {day: "${{ inputs.day }}"}
  - name: clean
    definition: registry://jobs/clean
    dependsOn: [extract]
    inputs: {rows: "${{ tasks.extract.outputs.rows }}"}
  - name: stats
    definition: registry://jobs/stats
    dependsOn: [extract]
    inputs: {rows: "${{ tasks.extract.outputs.rows }}"}
  - name: publish
    definition: registry://jobs/publish
    dependsOn: [clean, stats]
    inputs: {clean: "${{ tasks.clean.outputs.uri }}", stats: "${{ tasks.stats.outputs.uri }}"}
"""


def job(name: str, inputs: dict[str, Any], outputs: dict[str, Any], version: int = 1) -> Definition:
    return definition_from_document(
        {
            "name": name,
            "version": version,
            "inputs": inputs,
            "outputs": outputs,
            "execution": {"type": "python", "entrypoint": f"jobs:{name}"},
        }
    )


DEFINITIONS = {
    "extract": job("extract", {"day": "date"}, {"rows": "integer"}),
    "clean": job("clean", {"rows": "number"}, {"uri": "uri"}),
    "stats": job("stats", {"rows": "integer"}, {"uri": "uri"}),
    "publish": job("publish", {"clean": "string", "stats": "uri"}, {}),
}


def lookup(name: str, version: int | None) -> Definition | None:
    d = DEFINITIONS.get(name)
    return d if d is not None and version in (None, d.version) else None


def doc(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = yaml.safe_load(DIAMOND)
    base.update(changes)
    return base


def paths(exc: pytest.ExceptionInfo[InvalidInput]) -> dict[str, str]:
    return {e.path: e.message for e in exc.value.errors}


def test_the_issue_example_parses_from_yaml_and_json() -> None:
    w = parse_workflow(DIAMOND, "yaml")
    assert [t.name for t in w.tasks] == ["extract", "clean", "stats", "publish"]
    assert w.task("publish").depends_on == ("clean", "stats")
    assert w.task("extract").definition == "extract"
    assert w.task("extract").trigger_rule is TriggerRule.ALL_SUCCESS
    assert w.upstream("publish") == {"extract", "clean", "stats"}
    assert w.downstream("extract") == {"clean", "stats", "publish"}
    assert topological_order(w) == ["extract", "clean", "stats", "publish"]
    again = parse_workflow(json.dumps(yaml.safe_load(DIAMOND)).encode(), "json")
    assert again == w
    assert workflow_content_hash(again) == workflow_content_hash(w)
    assert workflow_from_document(workflow_to_document(w)) == w
    assert set(check_definitions(w, lookup)) == {"extract", "clean", "stats", "publish"}


def test_unreadable_text_and_unknown_format_are_bad_requests() -> None:
    with pytest.raises(BadRequest):
        parse_workflow("name: [", "yaml")
    with pytest.raises(BadRequest):
        parse_workflow("{", "json")
    with pytest.raises(BadRequest):
        parse_workflow("<x/>", "xml")


def test_a_cycle_is_named() -> None:
    d = doc()
    d["tasks"][0]["dependsOn"] = ["publish"]
    with pytest.raises(InvalidInput) as exc:
        workflow_from_document(d)
    (message,) = paths(exc).values()
    assert "dependency cycle:" in message
    assert "extract -> " in message and "publish" in message
    cycle = message.split(": ", 1)[1].split(" -> ")
    assert cycle[0] == cycle[-1] and len(cycle) == 4


def test_self_dependency_and_unknown_task_and_duplicates() -> None:
    d = doc()
    d["tasks"][1]["dependsOn"] = ["extract", "nope"]
    d["tasks"][2]["dependsOn"] = ["stats"]
    with pytest.raises(InvalidInput) as exc:
        workflow_from_document(d)
    assert "unknown task 'nope'" in paths(exc)["tasks[1].dependsOn"]
    assert "depends on itself" in paths(exc)["tasks[2].dependsOn"]
    d = doc()
    d["tasks"][3]["name"] = "clean"
    with pytest.raises(InvalidInput) as exc:
        workflow_from_document(d)
    assert "duplicate task name" in paths(exc)["tasks[3].name"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("${{ inputs.month }}", "undeclared workflow input"),
        ("${{ tasks.ghost.outputs.rows }}", "unknown task 'ghost'"),
        ("${{ tasks.stats.outputs.uri }}", "not upstream of 'clean'"),
        ("${{ env.HOME }}", "unknown expression"),
    ],
)
def test_bad_references_are_rejected(value: str, expected: str) -> None:
    d = doc()
    d["tasks"][1]["inputs"] = {"rows": value}
    with pytest.raises(InvalidInput) as exc:
        workflow_from_document(d)
    assert expected in paths(exc)["tasks[1].inputs.rows"]


def test_structural_field_errors() -> None:
    d = doc(version=0, extra=1, tasks=[{"name": "A", "definition": "http://x", "triggerRule": "x"}])
    with pytest.raises(InvalidInput) as exc:
        workflow_from_document(d)
    found = paths(exc)
    assert {"version", "extra", "tasks[0].name", "tasks[0].definition"} <= set(found)
    assert "tasks[0].triggerRule" in found
    with pytest.raises(InvalidInput):
        workflow_from_document(doc(tasks=[]))
    with pytest.raises(InvalidInput):
        workflow_from_document([1])


def test_unknown_definition_and_undeclared_output() -> None:
    d = doc()
    d["tasks"][0]["definition"] = "registry://jobs/missing"
    d["tasks"][3]["inputs"]["clean"] = "${{ tasks.clean.outputs.url }}"
    w = workflow_from_document(d)
    with pytest.raises(InvalidInput) as exc:
        check_definitions(w, lookup)
    found = paths(exc)
    assert "unknown definition registry://jobs/missing" in found["tasks[0].definition"]
    assert "declares no output 'url' (declared: uri)" in found["tasks[3].inputs.clean"]


def test_definition_version_is_looked_up() -> None:
    d = doc()
    d["tasks"][0]["definitionVersion"] = 2
    with pytest.raises(InvalidInput) as exc:
        check_definitions(workflow_from_document(d), lookup)
    assert "version 2" in paths(exc)["tasks[0].definition"]


def test_input_types_are_checked() -> None:
    d = doc(inputs={"day": "date", "n": "string"})
    d["tasks"][0]["inputs"] = {"day": 5, "extra": 1}  # literal of the wrong type; undeclared
    d["tasks"][1]["inputs"] = {"rows": "${{ inputs.n }}"}  # string feeding a number
    d["tasks"][2]["inputs"] = {}  # missing required input
    d["tasks"][3]["inputs"] = {
        "clean": "${{ tasks.clean.outputs.uri }}",
        "stats": "x ${{ inputs.n }}",
    }
    with pytest.raises(InvalidInput) as exc:
        check_definitions(workflow_from_document(d), lookup)
    found = paths(exc)
    assert "expected date, got integer" in found["tasks[0].inputs.day"]
    assert "not declared" in found["tasks[0].inputs.extra"]
    assert "expected number" in found["tasks[1].inputs.rows"]
    assert "is required" in found["tasks[2].inputs.rows"]
    assert "tasks[3].inputs.clean" not in found  # uri fits a string input
    assert "tasks[3].inputs.stats" not in found  # interpolated text may be a uri
    d["tasks"][1]["inputs"] = {"rows": 3}
    d["tasks"][2]["inputs"] = {"rows": "${{ tasks.extract.outputs.rows }}"}
    d["tasks"][0]["inputs"] = {"day": "2026-01-01"}
    check_definitions(workflow_from_document(d), lookup)


def test_integer_inputs_cannot_take_interpolated_text() -> None:
    d = doc()
    d["tasks"][2]["inputs"] = {"rows": "n=${{ tasks.extract.outputs.rows }}"}
    with pytest.raises(InvalidInput) as exc:
        check_definitions(workflow_from_document(d), lookup)
    assert "text with expressions is a string" in paths(exc)["tasks[2].inputs.rows"]


def test_diff_names_changed_fields() -> None:
    a = parse_workflow(DIAMOND, "yaml")
    d = doc()
    d["tasks"][1]["triggerRule"] = "all_done"
    b = workflow_from_document(d)
    assert diff_workflows(a, b) == ["tasks.clean.triggerRule"]
    assert diff_workflows(a, a) == []


def test_find_cycle_on_acyclic_graph_is_none() -> None:
    assert find_cycle(parse_workflow(DIAMOND, "yaml").tasks) is None


def test_expressions_resolve_whole_values_and_interpolate() -> None:
    assert parse_ref(" inputs.day ") == InputRef("day")
    assert parse_ref("tasks.a-b.outputs.x") == OutputRef("a-b", "x")
    assert parse_ref("tasks.a.x") is None
    inputs = {"day": "2026-01-01", "n": 3}
    outputs = {"extract": {"rows": [1, 2], "uri": "s3://x"}}
    assert resolve("${{ tasks.extract.outputs.rows }}", inputs, outputs) == [1, 2]
    assert resolve("${{inputs.n}}", inputs, outputs) == 3
    value = {"a": ["day=${{ inputs.day }}, n=${{ inputs.n }}"], "b": 1}
    assert resolve(value, inputs, outputs) == {"a": ["day=2026-01-01, n=3"], "b": 1}
    with pytest.raises(UnresolvedReference):
        resolve("${{ tasks.extract.outputs.missing }}", inputs, outputs)
