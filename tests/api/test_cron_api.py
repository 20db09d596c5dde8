"""The cron API over HTTP semantics, on both backends: every route, every error status."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import Api
from tests.factories import definition_doc
from tickwheel.api.inprocess_workflows import InProcessWorkflowsTransport
from tickwheel.client.client import AsyncClient
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.cron.service import CronService
from tickwheel.domain.models import Scope
from tickwheel.store.factory import cron_store_for, workflow_store_for

JOB = {
    "name": "nightly",
    "definitionUri": "registry://jobs/greet",
    "expression": "0 2 * * *",
    "timezone": "Europe/Berlin",
    "inputs": {"name": "Ada"},
}


@pytest.fixture(autouse=True)
async def greet(api: Api) -> None:
    r = await api.http.put("/v1/definitions", json=definition_doc())
    assert r.status_code == 201


async def create(api: Api, **changes: Any) -> dict[str, Any]:
    r = await api.http.post("/v1/cron-jobs", json={**JOB, **changes})
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


def paths(r: Any) -> list[str]:
    return [d["path"] for d in r.json()["error"]["details"]]


async def test_create_shows_the_job_and_its_next_fire_times(api: Api) -> None:
    job = await create(api)
    assert job["status"] == "ACTIVE" and job["version"] == 1
    assert job["definitionVersion"] is None and job["definitionVersionPolicy"] == "latest"
    assert job["misfirePolicy"] == "run_once" and job["overlapPolicy"] == "allow"
    assert job["dstPolicy"] == {"nonexistent": "shift_forward", "ambiguous": "first"}
    assert job["nextRunAt"] == "2026-03-02T01:00:00Z"  # 02:00 CET
    assert [f["at"] for f in job["nextFireTimes"]][:2] == [
        "2026-03-02T01:00:00Z",
        "2026-03-03T01:00:00Z",
    ]
    assert job["nextFireTimes"][0]["local"] == "2026-03-02T02:00:00+01:00"
    assert len(job["nextFireTimes"]) == 5
    pinned = await create(api, name="pinned", definitionVersion=1)
    assert pinned["definitionVersionPolicy"] == "pinned"


async def test_get_marks_fire_times_a_dst_rule_moved(api: Api) -> None:
    job = await create(api, startAt="2026-03-27T00:00:00Z")
    r = await api.http.get(f"/v1/cron-jobs/{job['cronJobId']}")
    assert r.status_code == 200
    fires = r.json()["nextFireTimes"]
    assert [f["at"] for f in fires] == [
        "2026-03-27T01:00:00Z",
        "2026-03-28T01:00:00Z",
        "2026-03-29T01:00:00Z",
        "2026-03-30T00:00:00Z",
        "2026-03-31T00:00:00Z",
    ]
    moved = fires[2]
    assert moved["dst"] == "shifted" and moved["local"] == "2026-03-29T03:00:00+02:00"
    assert "does not exist" in moved["reason"]
    assert fires[3]["dst"] is None and fires[3]["zone"] == "CEST"
    by_name = await api.http.get("/v1/cron-jobs/nightly")
    assert by_name.json()["cronJobId"] == job["cronJobId"]


async def test_create_again_is_idempotent_and_a_different_job_is_409(api: Api) -> None:
    first = await create(api)
    again = await api.http.post("/v1/cron-jobs", json=JOB)
    assert again.status_code == 200 and again.json()["cronJobId"] == first["cronJobId"]
    other = await api.http.post("/v1/cron-jobs", json={**JOB, "expression": "0 3 * * *"})
    assert other.status_code == 409
    assert other.json()["error"]["details"]["cronJobId"] == first["cronJobId"]


@pytest.mark.parametrize(
    ("changes", "path", "says"),
    [
        ({"expression": "0 25 * * *"}, "expression", "field 2 (hour): 25 is out of range 0-23"),
        ({"expression": "0 2 * *"}, "expression", "expected 5 fields"),
        ({"timezone": "Europe/Berln"}, "timezone", "did you mean 'Europe/Berlin'"),
        ({"definitionUri": "registry://jobs/nope"}, "definitionUri", "no such definition"),
        ({"definitionVersion": 7}, "definitionVersion", "no such definition"),
        ({"inputs": {"name": 5}}, "inputs.name", ""),
        ({"inputs": {}}, "inputs.name", ""),
        ({"maxCatchUp": 0}, "maxCatchUp", "between 1 and 1000"),
        ({"jitter": -1}, "jitter", "between 0 and 3600"),
        ({"misfirePolicy": "sometimes"}, "misfirePolicy", "skip"),
        ({"dstPolicy": {"nonexistent": "later"}}, "dstPolicy.nonexistent", ""),
        ({"endAt": "2026-01-01T00:00:00Z", "startAt": "2026-02-01T00:00:00Z"}, "endAt", "after"),
        ({"name": "no spaces"}, "name", "letters"),
        ({"colour": "red"}, "colour", "not a known field"),
    ],
)
async def test_invalid_jobs_are_422_naming_the_field_and_nothing_is_stored(
    api: Api, changes: dict[str, Any], path: str, says: str
) -> None:
    r = await api.http.post("/v1/cron-jobs", json={**JOB, **changes})
    assert r.status_code == 422, r.text
    assert path in paths(r)
    assert says in r.text
    assert (await api.http.get("/v1/cron-jobs")).json()["items"] == []


async def test_a_required_field_missing_is_422(api: Api) -> None:
    r = await api.http.post("/v1/cron-jobs", json={"name": "x", "definitionUri": "greet"})
    assert r.status_code == 422 and paths(r) == ["expression"]


async def test_list_pages_by_name(api: Api) -> None:
    for name in ("b", "a", "c"):
        await create(api, name=name)
    first = (await api.http.get("/v1/cron-jobs", params={"limit": 2})).json()
    assert [j["name"] for j in first["items"]] == ["a", "b"]
    rest = await api.http.get("/v1/cron-jobs", params={"limit": 2, "cursor": first["nextCursor"]})
    assert [j["name"] for j in rest.json()["items"]] == ["c"] and rest.json()["nextCursor"] is None


async def test_other_tenants_see_nothing(api: Api) -> None:
    job = await create(api)
    other = await api.key(Scope.ADMIN, tenant="globex")
    for method, path in (
        ("GET", f"/v1/cron-jobs/{job['cronJobId']}"),
        ("GET", "/v1/cron-jobs/nightly"),
        ("PATCH", f"/v1/cron-jobs/{job['cronJobId']}"),
        ("POST", f"/v1/cron-jobs/{job['cronJobId']}/pause"),
        ("DELETE", f"/v1/cron-jobs/{job['cronJobId']}"),
        ("GET", f"/v1/cron-jobs/{job['cronJobId']}/executions"),
    ):
        kwargs: dict[str, Any] = {"json": {}} if method == "PATCH" else {}
        r = await api.http.request(method, path, headers=other, **kwargs)
        assert r.status_code == 404, (method, path, r.text)
    assert (await api.http.get("/v1/cron-jobs", headers=other)).json()["items"] == []


async def test_scopes_read_may_look_submit_may_change(api: Api) -> None:
    job = await create(api)
    read = await api.key(Scope.READ)
    submit = await api.key(Scope.SUBMIT)
    assert (
        await api.http.get(f"/v1/cron-jobs/{job['cronJobId']}", headers=read)
    ).status_code == 200
    assert (
        await api.http.get("/v1/cron/preview?expression=@daily", headers=read)
    ).status_code == 200
    r = await api.http.post("/v1/cron-jobs", json={**JOB, "name": "x"}, headers=read)
    assert r.status_code == 403
    r = await api.http.post(f"/v1/cron-jobs/{job['cronJobId']}/pause", headers=read)
    assert r.status_code == 403
    r = await api.http.post("/v1/cron-jobs", json={**JOB, "name": "x"}, headers=submit)
    assert r.status_code == 201
    assert (await api.http.get("/v1/cron-jobs", headers={"Authorization": ""})).status_code == 401


async def test_patch_is_optimistic_and_recomputes_the_next_run(api: Api) -> None:
    job = await create(api)
    url = f"/v1/cron-jobs/{job['cronJobId']}"
    r = await api.http.patch(url, json={"expression": "30 4 * * *", "version": 1})
    assert r.status_code == 200, r.text
    changed = r.json()
    assert changed["version"] == 2 and changed["nextRunAt"] == "2026-03-02T03:30:00Z"
    stale = await api.http.patch(url, json={"inputs": {"name": "Grace"}, "version": 1})
    assert stale.status_code == 409 and "version 2" in stale.json()["error"]["message"]
    bad = await api.http.patch(url, json={"timezone": "Mars/Olympus", "version": 2})
    assert bad.status_code == 422 and paths(bad) == ["timezone"]
    unknown = await api.http.patch(url, json={"colour": "red"})
    assert unknown.status_code == 422
    same = await api.http.patch(url, json={"inputs": {"name": "Grace"}})
    assert same.json()["version"] == 3 and same.json()["nextRunAt"] == "2026-03-02T03:30:00Z"
    audit = (await api.http.get(f"{url}/audit")).json()["items"]
    assert [a["action"] for a in audit] == ["created", "updated", "updated"]
    assert audit[1]["before"]["expression"] == "0 2 * * *"
    assert audit[1]["after"]["expression"] == "30 4 * * *"
    assert audit[0]["actor"].startswith("key:")


async def test_pause_resume_and_delete(api: Api) -> None:
    job = await create(api)
    url = f"/v1/cron-jobs/{job['cronJobId']}"
    paused = (await api.http.post(f"{url}/pause")).json()
    assert paused["status"] == "PAUSED" and paused["pausedAt"] == "2026-03-01T12:00:00Z"
    assert (await api.http.post(f"{url}/pause")).json()["version"] == paused["version"]
    bad = await api.http.post(f"{url}/resume", json={"catchUp": "yes"})
    assert bad.status_code == 422 and paths(bad) == ["catchUp"]
    resumed = await api.http.post(f"{url}/resume", json={"catchUp": True})
    assert resumed.status_code == 200 and resumed.json()["status"] == "ACTIVE"
    await api.http.post(f"{url}/pause")
    assert (await api.http.post(f"{url}/resume")).json()["status"] == "ACTIVE"
    version = (await api.http.get(url)).json()["version"]
    assert (await api.http.delete(url, params={"version": version - 1})).status_code == 409
    gone = await api.http.delete(url, params={"version": version})
    assert gone.status_code == 200 and gone.json()["deleted"] is True
    assert (await api.http.get(url)).status_code == 404
    assert (await api.http.delete(url)).status_code == 404


async def test_history_pages_executions_and_skipped_occurrences(api: Api) -> None:
    job = await create(api, expression="* * * * *", overlapPolicy="forbid", timezone="UTC")
    cron = cron_store_for(api.store)
    client = AsyncClient(transport=InProcessTransport(api.store, "acme", api.clock))
    service = CronService(cron, lambda _: client, clock=api.clock)
    for _ in range(3):
        api.clock.advance(60)
        await service.run_once()
    url = f"/v1/cron-jobs/{job['cronJobId']}/executions"
    first = (await api.http.get(url, params={"limit": 2})).json()
    assert [(i["occurrence"], i["outcome"]) for i in first["items"]] == [
        ("2026-03-01T12:03:00Z", "SKIPPED_OVERLAP"),
        ("2026-03-01T12:02:00Z", "SKIPPED_OVERLAP"),
    ]
    assert "overlapPolicy forbid" in first["items"][0]["reason"]
    rest = (await api.http.get(url, params={"limit": 2, "cursor": first["nextCursor"]})).json()
    [submitted] = rest["items"]
    assert submitted["outcome"] == "SUBMITTED" and submitted["executionStatus"] == "READY"
    execution = await api.http.get(f"/v1/executions/{submitted['executionId']}")
    assert execution.json()["idempotencyKey"] == f"cron:{job['cronJobId']}:2026-03-01T12:01:00Z"
    assert rest["nextCursor"] is None
    bad = await api.http.get(url, params={"cursor": "nonsense"})
    assert bad.status_code == 400


async def test_preview_explains_dst_and_validates(api: Api) -> None:
    r = await api.http.get(
        "/v1/cron/preview",
        params={
            "expression": "30 2 * * *",
            "timezone": "Europe/Berlin",
            "from": "2026-03-28T00:00:00Z",
            "count": 3,
        },
    )
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    assert [i["at"] for i in items] == [
        "2026-03-28T01:30:00Z",
        "2026-03-29T01:00:00Z",
        "2026-03-30T00:30:00Z",
    ]
    assert items[1]["dst"] == "shifted" and items[0]["dst"] is None
    skip = await api.http.get(
        "/v1/cron/preview",
        params={
            "expression": "30 2 * * *",
            "timezone": "Europe/Berlin",
            "from": "2026-03-28T00:00:00Z",
            "count": 2,
            "nonexistent": "skip",
        },
    )
    assert [i["fires"] for i in skip.json()["items"]] == [True, False, True]
    for params, path in (
        ({"expression": "61 * * * *"}, "expression"),
        ({"expression": "@daily", "timezone": "Nowhere/Land"}, "timezone"),
        ({"expression": "@daily", "count": 0}, "count"),
        ({"expression": "@daily", "from": "2026-03-28T00:00:00"}, "from"),
        ({"expression": "@daily", "ambiguous": "third"}, "dstPolicy.ambiguous"),
        ({}, "expression"),
    ):
        bad = await api.http.get("/v1/cron/preview", params=params)
        assert bad.status_code == 422, (params, bad.text)
        assert path in paths(bad), (params, bad.text)


async def test_apply_plans_creates_updates_prunes_and_audits(api: Api) -> None:
    declared = [JOB, {**JOB, "name": "hourly", "expression": "@hourly"}]
    dry = await api.http.post("/v1/cron-jobs/apply", json={"cronJobs": declared, "dryRun": True})
    assert dry.status_code == 200
    assert [(p["action"], p["name"]) for p in dry.json()["plan"]] == [
        ("create", "nightly"),
        ("create", "hourly"),
    ]
    assert (await api.http.get("/v1/cron-jobs")).json()["items"] == []
    applied = (await api.http.post("/v1/cron-jobs/apply", json={"cronJobs": declared})).json()
    assert applied["summary"] == {"create": 2, "update": 0, "delete": 0, "unchanged": 0}
    assert all(p["cronJobId"] for p in applied["plan"])
    again = (await api.http.post("/v1/cron-jobs/apply", json={"cronJobs": declared})).json()
    assert again["summary"]["unchanged"] == 2
    changed = [{**JOB, "jitter": 30}]
    pruned = (
        await api.http.post("/v1/cron-jobs/apply", json={"cronJobs": changed, "prune": True})
    ).json()
    assert [(p["action"], p["name"], p["changes"]) for p in pruned["plan"]] == [
        ("update", "nightly", ["jitter"]),
        ("delete", "hourly", []),
    ]
    assert [j["name"] for j in (await api.http.get("/v1/cron-jobs")).json()["items"]] == ["nightly"]
    audit = (await api.http.get("/v1/cron-jobs/nightly/audit")).json()["items"]
    assert [a["action"] for a in audit] == ["created", "updated"]


async def test_apply_changes_nothing_unless_every_document_is_valid(api: Api) -> None:
    declared = [
        {**JOB, "name": "ok"},
        {**JOB, "name": "bad", "expression": "0 99 * * *"},
        {**JOB, "name": "ok"},
    ]
    r = await api.http.post("/v1/cron-jobs/apply", json={"cronJobs": declared})
    assert r.status_code == 422
    assert paths(r) == ["cronJobs[1].expression", "cronJobs[2].name"]
    assert (await api.http.get("/v1/cron-jobs")).json()["items"] == []


# -- jobs that target a workflow ------------------------------------------------------------------

GREETING = """
name: greeting
version: 1
inputs: {who: {type: string, required: true}}
tasks:
  - {name: hello, definition: registry://jobs/greet, inputs: {name: "${{ inputs.who }}"}}
"""
WF_JOB = {
    "name": "wf-nightly",
    "workflow": {"name": "greeting"},
    "expression": "0 2 * * *",
    "inputs": {"who": "Ada"},
}


async def register_greeting(api: Api) -> None:
    r = await api.http.put(
        "/v1/workflows", content=GREETING, headers={"Content-Type": "application/yaml"}
    )
    assert r.status_code == 201, r.text


async def test_a_job_may_target_a_workflow_and_says_so(api: Api) -> None:
    await register_greeting(api)
    r = await api.http.post("/v1/cron-jobs", json=WF_JOB)
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["target"] == "workflow" and job["workflow"] == {"name": "greeting", "version": None}
    assert job["definitionUri"] is None and job["definitionVersionPolicy"] is None
    assert job["workflowVersionPolicy"] == "latest" and len(job["nextFireTimes"]) == 5
    assert (await api.http.post("/v1/cron-jobs", json=WF_JOB)).status_code == 200
    listed = (await api.http.get("/v1/cron-jobs")).json()["items"]
    assert [(j["name"], j["target"]) for j in listed] == [("wf-nightly", "workflow")]
    # A PATCH naming the other target switches the job to it.
    url = f"/v1/cron-jobs/{job['cronJobId']}"
    switched = await api.http.patch(
        url, json={"definitionUri": "greet", "inputs": {"name": "Ada"}, "version": 1}
    )
    assert switched.status_code == 200, switched.text
    assert switched.json()["target"] == "definition" and switched.json()["workflow"] is None
    back = await api.http.patch(url, json={"workflow": {"name": "greeting", "version": 1}})
    assert back.status_code == 422 and "inputs.who" in paths(back)  # the inputs are greet's
    pinned = await api.http.patch(
        url, json={"workflow": {"name": "greeting", "version": 1}, "inputs": {"who": "Bo"}}
    )
    assert pinned.json()["workflowVersionPolicy"] == "pinned"


@pytest.mark.parametrize(
    ("changes", "path", "says"),
    [
        ({"definitionUri": "greet"}, "workflow", "either definitionUri or workflow, not both"),
        ({"workflow": None}, "definitionUri", "give either definitionUri"),
        ({"workflow": {"name": "nope"}}, "workflow.name", "no workflow is registered as 'nope'"),
        ({"workflow": {"name": "greeting", "version": 3}}, "workflow.version", "no such workflow"),
        ({"workflow": {"version": 1}}, "workflow.name", "is required"),
        ({"inputs": {"who": 7}}, "inputs.who", "workflow greeting version 1"),
        ({"inputs": {"whom": "Ada"}}, "inputs.whom", ""),
        ({"jitter": 10}, "jitter", "not available for a workflow target"),
    ],
)
async def test_an_invalid_workflow_target_is_422_and_nothing_is_stored(
    api: Api, changes: dict[str, Any], path: str, says: str
) -> None:
    await register_greeting(api)
    r = await api.http.post("/v1/cron-jobs", json={**WF_JOB, **changes})
    assert r.status_code == 422, r.text
    assert path in paths(r)
    assert says in r.text
    assert (await api.http.get("/v1/cron-jobs")).json()["items"] == []


async def test_history_links_each_occurrence_to_its_workflow_run(api: Api) -> None:
    await register_greeting(api)
    job = (await api.http.post("/v1/cron-jobs", json={**WF_JOB, "expression": "* * * * *"})).json()
    cron = cron_store_for(api.store)
    transport = InProcessTransport(api.store, "acme", api.clock)
    runs = InProcessWorkflowsTransport(workflow_store_for(api.store), transport, api.clock)
    client = AsyncClient(transport=transport, clock=api.clock, workflows_transport=runs)
    service = CronService(cron, lambda _: client, clock=api.clock)
    api.clock.advance(60)
    await service.run_once()
    [row] = (await api.http.get(f"/v1/cron-jobs/{job['cronJobId']}/executions")).json()["items"]
    assert row["outcome"] == "SUBMITTED" and row["executionId"] is None
    assert row["workflowRunStatus"] == "RUNNING"
    run = (await api.http.get(f"/v1/workflow-runs/{row['workflowRunId']}")).json()
    assert run["idempotencyKey"] == f"cron-wf:{job['cronJobId']}:2026-03-01T12:01:00Z"


async def test_apply_declares_both_kinds_and_dry_run_changes_nothing(api: Api) -> None:
    await register_greeting(api)
    declared = [JOB, WF_JOB]
    dry = (
        await api.http.post("/v1/cron-jobs/apply", json={"cronJobs": declared, "dryRun": True})
    ).json()
    assert [(p["action"], p["name"]) for p in dry["plan"]] == [
        ("create", "nightly"),
        ("create", "wf-nightly"),
    ]
    assert (await api.http.get("/v1/cron-jobs")).json()["items"] == []
    await api.http.post("/v1/cron-jobs/apply", json={"cronJobs": declared})
    moved = [JOB, {**WF_JOB, "workflow": {"name": "greeting", "version": 1}}]
    plan = (await api.http.post("/v1/cron-jobs/apply", json={"cronJobs": moved})).json()["plan"]
    assert [(p["action"], p["changes"]) for p in plan] == [
        ("unchanged", []),
        ("update", ["workflow"]),
    ]
    bad = [{**WF_JOB, "definitionUri": "greet"}]
    r = await api.http.post("/v1/cron-jobs/apply", json={"cronJobs": bad, "dryRun": True})
    assert r.status_code == 422 and paths(r) == ["cronJobs[0].workflow"]
