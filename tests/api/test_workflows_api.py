"""The workflow API over HTTP semantics, on both backends: every route, every error status."""

from __future__ import annotations

import json
import uuid

import pytest
import yaml

from tests.api.conftest import Api
from tests.factories import stored
from tests.workflows.helpers import DIAMOND, JOB_DOCS, job_doc
from tickwheel.domain.definitions import definition_from_document
from tickwheel.domain.models import Scope

YAML = {"Content-Type": "application/yaml"}
RUN = {"workflow": "nightly-report", "inputs": {"day": "2026-03-01"}}


@pytest.fixture(autouse=True)
async def registered(api: Api) -> None:
    for name in JOB_DOCS:
        assert await api.store.definition_insert(stored(definition_from_document(job_doc(name))))
    r = await api.http.put("/v1/workflows", content=DIAMOND, headers=YAML)
    assert r.status_code == 201, r.text


async def start(api: Api, key: str = "k1", **body: object) -> dict[str, object]:
    r = await api.http.post(
        "/v1/workflow-runs", json={**RUN, **body}, headers={"Idempotency-Key": key}
    )
    assert r.status_code == 201, r.text
    result: dict[str, object] = r.json()
    return result


async def test_register_list_and_get(api: Api) -> None:
    as_json = json.dumps(yaml.safe_load(DIAMOND))
    r = await api.http.put(
        "/v1/workflows", content=as_json, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 200
    changed = DIAMOND.replace("{clean: ", "{stats: ").replace(
        ', stats: "${{ tasks.stats', ', clean: "${{ tasks.stats'
    )
    r = await api.http.put(
        "/v1/workflows",
        content=changed.replace("version: 1", "version: 1\ndescription: x"),
        headers=YAML,
    )
    assert r.status_code == 409
    assert "description" in r.json()["error"]["details"]["differingFields"]
    r = await api.http.put(
        "/v1/workflows", content=DIAMOND.replace("[clean, stats]", "[clean, nope]"), headers=YAML
    )
    assert r.status_code == 422
    assert r.json()["error"]["details"][0]["path"] == "tasks[3].dependsOn"
    r = await api.http.put(
        "/v1/workflows", content="name: x", headers={"Content-Type": "text/plain"}
    )
    assert r.status_code == 400
    r = await api.http.get("/v1/workflows")
    assert [w["name"] for w in r.json()["items"]] == ["nightly-report"]
    r = await api.http.get("/v1/workflows/nightly-report", params={"version": 1})
    assert r.status_code == 200 and len(r.json()["tasks"]) == 4
    assert (await api.http.get("/v1/workflows/nope")).status_code == 404


async def test_runs_start_idempotently_and_read_back(api: Api) -> None:
    run = await start(api)
    run_id = run["workflowRunId"]
    assert run["status"] == "RUNNING"
    tasks = {t["name"]: t for t in run["tasks"]}  # type: ignore[attr-defined]
    assert tasks["extract"]["status"] == "SUBMITTED" and tasks["extract"]["executionId"]
    r = await api.http.post("/v1/workflow-runs", json=RUN, headers={"Idempotency-Key": "k1"})
    assert r.status_code == 200 and r.json()["workflowRunId"] == run_id
    other = {**RUN, "inputs": {"day": "2026-03-02"}}
    r = await api.http.post("/v1/workflow-runs", json=other, headers={"Idempotency-Key": "k1"})
    assert r.status_code == 409
    r = await api.http.post("/v1/workflow-runs", json={**RUN, "inputs": {"day": 3}})
    assert r.status_code == 422
    r = await api.http.post("/v1/workflow-runs", json={**RUN, "version": 9})
    assert r.status_code == 404
    r = await api.http.post("/v1/workflow-runs", json={**RUN, "extra": 1})
    assert r.status_code == 422
    r = await api.http.get(f"/v1/workflow-runs/{run_id}")
    assert r.status_code == 200 and r.json()["tasks"][0]["name"] == "extract"
    assert (await api.http.get(f"/v1/workflow-runs/{uuid.uuid4()}")).status_code == 404


async def test_runs_are_tenant_scoped_and_scopes_are_enforced(api: Api) -> None:
    run_id = (await start(api))["workflowRunId"]
    other = await api.key(Scope.ADMIN, tenant="globex")
    assert (await api.http.get(f"/v1/workflow-runs/{run_id}", headers=other)).status_code == 404
    r = await api.http.delete(f"/v1/workflow-runs/{run_id}", headers=other)
    assert r.status_code == 404
    reader = await api.key(Scope.READ)
    assert (await api.http.post("/v1/workflow-runs", json=RUN, headers=reader)).status_code == 403
    assert (await api.http.get(f"/v1/workflow-runs/{run_id}", headers=reader)).status_code == 200
    submitter = await api.key(Scope.SUBMIT)
    r = await api.http.put("/v1/workflows", content=DIAMOND, headers={**YAML, **submitter})
    assert r.status_code == 403
    assert (
        await api.http.post("/v1/workflow-runs", json=RUN, headers=submitter)
    ).status_code == 201


async def test_cancel_then_retry(api: Api) -> None:
    run_id = (await start(api))["workflowRunId"]
    r = await api.http.post(f"/v1/workflow-runs/{run_id}/retry")
    assert r.status_code == 409  # still RUNNING
    r = await api.http.delete(f"/v1/workflow-runs/{run_id}")
    assert r.status_code == 200 and r.json()["status"] == "CANCELLED"
    assert {t["status"] for t in r.json()["tasks"]} == {"CANCELLED"}
    assert (await api.http.delete(f"/v1/workflow-runs/{run_id}")).status_code == 409
    r = await api.http.post(f"/v1/workflow-runs/{run_id}/retry")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "RUNNING" and body["retryCount"] == 1
    assert body["tasks"][0]["status"] == "SUBMITTED"
