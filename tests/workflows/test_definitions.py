"""Registering Workflow Definitions against the stored Job Definitions, on both backends."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.workflows.helpers import DIAMOND, WorkflowRig, chain
from tickwheel.domain.errors import BadRequest, Conflict, InvalidInput, NotFound


async def test_new_same_and_different_content(rig: WorkflowRig) -> None:
    wire, created = await rig.definitions.apply(DIAMOND, "yaml")
    assert created and wire["name"] == "nightly-report" and wire["version"] == 1
    as_json = json.dumps(yaml.safe_load(DIAMOND))
    again, created = await rig.definitions.apply(as_json, "json")
    assert not created and again["contentHash"] == wire["contentHash"]
    changed = DIAMOND.replace("dependsOn: [clean, stats]", "dependsOn: [clean, stats, extract]")
    with pytest.raises(Conflict) as conflict:
        await rig.definitions.apply(changed, "yaml")
    assert conflict.value.details["differingFields"] == ["tasks.publish.dependsOn"]
    assert [w["name"] for w in await rig.definitions.list()] == ["nightly-report"]
    assert (await rig.definitions.get("nightly-report", 1))["tasks"][0]["name"] == "extract"
    with pytest.raises(NotFound):
        await rig.definitions.get("nightly-report", 2)


async def test_cycles_unknown_definitions_and_outputs_are_422(rig: WorkflowRig) -> None:
    cyclic = chain({"name": "a", "dependsOn": ["b"]}, {"name": "b", "dependsOn": ["a"]})
    with pytest.raises(InvalidInput) as bad:
        await rig.definitions.apply(cyclic, "yaml")
    assert "a -> b -> a" in bad.value.errors[0].message
    unknown = DIAMOND.replace("registry://jobs/stats", "registry://jobs/nope")
    with pytest.raises(InvalidInput) as bad:
        await rig.definitions.apply(unknown, "yaml")
    assert [e.path for e in bad.value.errors] == ["tasks[2].definition"]
    no_output = DIAMOND.replace("tasks.clean.outputs.uri", "tasks.clean.outputs.url")
    with pytest.raises(InvalidInput) as bad:
        await rig.definitions.apply(no_output, "yaml")
    assert [e.path for e in bad.value.errors] == ["tasks[3].inputs.clean"]
    with pytest.raises(BadRequest):
        await rig.definitions.apply("name: [", "yaml")
    assert await rig.definitions.list() == []
