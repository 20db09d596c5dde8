"""The definition trust boundary over HTTP (issue 12), on both backends: definitions and workflows
belong to a tenant or to the shared registry; only an operator key publishes shared ones; a
tenant never sees, nor runs, another tenant's; a tenant may not take a shared name."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import Api
from tests.factories import definition_doc
from tickwheel.domain.models import Scope

YAML = {"Content-Type": "application/yaml"}


def secret_doc(name: str = "secret", version: int = 1) -> dict[str, Any]:
    return definition_doc(
        name,
        version,
        inputs={"name": "string"},
        outputs={},
        execution={
            "type": "http",
            "url": "https://example.com/hook",
            "headers": {
                "Authorization": "Bearer ${{ secrets.DEFAULT_ONLY }}",
                "X-Team": "default-only",
            },
        },
    )


@pytest.fixture
async def keys(api: Api) -> dict[str, dict[str, str]]:
    return {
        "acme": await api.key(Scope.ADMIN, tenant="acme"),
        "default": await api.key(Scope.ADMIN, tenant="default"),
        "operator": await api.key(Scope.OPERATOR, tenant="default"),
    }


async def put(api: Api, doc: dict[str, Any], key: dict[str, str], shared: bool = False) -> Any:
    params = {"shared": "true"} if shared else {}
    return await api.http.put("/v1/definitions", json=doc, headers=key, params=params)


async def submit(api: Api, key: dict[str, str], name: str) -> dict[str, Any]:
    body = {"definitionUri": f"registry://jobs/{name}", "inputs": {"name": "Ada"}}
    r = await api.http.post("/v1/executions", json=body, headers=key)
    assert r.status_code == 201, r.text
    result: dict[str, Any] = r.json()
    return result


async def test_another_tenants_version_never_reaches_defaults_submissions(
    api: Api, keys: dict[str, dict[str, str]]
) -> None:
    """The issue's attack: acme registers ``victim`` v2; default's unpinned submission still
    pins its own v1, and the worker's lookup for default's execution finds default's v1."""
    assert (await put(api, definition_doc("victim", 1), keys["default"])).status_code == 201
    r = await put(api, definition_doc("victim", 2, description="acme's code"), keys["acme"])
    assert r.status_code == 201, r.text  # acme's own "victim": nobody else resolves it
    assert r.json()["owner"] == "acme" and r.json()["shared"] is False
    execution = await submit(api, keys["default"], "victim")
    assert execution["definitionVersion"] == 1
    resolved = await api.store.definition_get("default", "victim", 1)
    assert resolved is not None and resolved.owner == "default"
    assert resolved.definition.description == "Say hello"
    pinned = {"definitionUri": "registry://jobs/victim", "definitionVersion": 2, "inputs": {}}
    r = await api.http.post("/v1/executions", json=pinned, headers=keys["default"])
    assert r.status_code == 422  # acme's v2 is not default's to pin
    assert (await submit(api, keys["acme"], "victim"))["definitionVersion"] == 2


async def test_a_tenant_never_reads_another_tenants_definitions(
    api: Api, keys: dict[str, dict[str, str]]
) -> None:
    assert (await put(api, secret_doc(), keys["default"])).status_code == 201
    for path in ("/v1/definitions/secret", "/v1/definitions/secret/versions/1"):
        r = await api.http.get(path, headers=keys["acme"])
        assert r.status_code == 404, path
        assert "default-only" not in r.text
    listed = (await api.http.get("/v1/definitions", headers=keys["acme"])).json()["items"]
    assert [d["name"] for d in listed] == []
    mine = (await api.http.get("/v1/definitions", headers=keys["default"])).json()["items"]
    assert [(d["name"], d["owner"], d["shared"]) for d in mine] == [("secret", "default", False)]
    body = {"definitionUri": "registry://jobs/secret", "inputs": {"name": "x"}}
    r = await api.http.post("/v1/executions", json=body, headers=keys["acme"])
    assert r.status_code == 422  # nor submit it


async def test_only_an_operator_key_publishes_shared_definitions(
    api: Api, keys: dict[str, dict[str, str]]
) -> None:
    for scope in (Scope.READ, Scope.SUBMIT, Scope.ADMIN):
        r = await put(api, definition_doc("common"), await api.key(scope), shared=True)
        assert r.status_code == 403, scope
        assert r.json()["error"]["code"] == "forbidden"
    assert "operator" in r.json()["error"]["message"]
    assert await api.store.definition_get("acme", "common") is None  # nothing stored
    r = await put(api, definition_doc("common"), keys["operator"], shared=True)
    assert r.status_code == 201, r.text
    assert r.json()["shared"] is True and r.json()["owner"] is None
    for tenant in ("acme", "default", "globex"):
        key = keys.get(tenant) or await api.key(Scope.READ, tenant=tenant)
        listed = (await api.http.get("/v1/definitions", headers=key)).json()["items"]
        assert [(d["name"], d["shared"]) for d in listed] == [("common", True)]
    assert (await submit(api, keys["acme"], "common"))["definitionVersion"] == 1


async def test_a_tenant_may_not_take_a_shared_name(
    api: Api, keys: dict[str, dict[str, str]]
) -> None:
    assert (await put(api, definition_doc("billing"), keys["operator"], True)).status_code == 201
    r = await put(api, definition_doc("billing", 2), keys["acme"])
    assert r.status_code == 409
    assert "billing is a shared definition; choose another name" in r.json()["error"]["message"]
    versions = (await api.http.get("/v1/definitions/billing", headers=keys["acme"])).json()
    assert [(v["version"], v["shared"]) for v in versions["items"]] == [(1, True)]
    # The operator may publish a name a tenant owns: that tenant keeps resolving to its own.
    assert (await put(api, definition_doc("etl", 3), keys["acme"])).status_code == 201
    assert (await put(api, definition_doc("etl"), keys["operator"], True)).status_code == 201
    assert (await submit(api, keys["acme"], "etl"))["definitionVersion"] == 3
    assert (await submit(api, keys["default"], "etl"))["definitionVersion"] == 1
    assert (await put(api, definition_doc("etl", 4), keys["acme"])).status_code == 201


# -- workflows ------------------------------------------------------------------------------------

WORKFLOW = """
name: {name}
version: {version}
tasks:
  - name: hello
    definition: registry://jobs/{job}
    inputs: {{name: Ada}}
"""


async def put_workflow(
    api: Api, key: dict[str, str], name: str, job: str, version: int = 1, shared: bool = False
) -> Any:
    text = WORKFLOW.format(name=name, version=version, job=job)
    params = {"shared": "true"} if shared else {}
    return await api.http.put("/v1/workflows", content=text, headers={**YAML, **key}, params=params)


async def test_workflows_belong_to_a_tenant_or_the_shared_registry(
    api: Api, keys: dict[str, dict[str, str]]
) -> None:
    assert (await put(api, definition_doc("greet"), keys["operator"], True)).status_code == 201
    assert (await put(api, secret_doc(), keys["default"])).status_code == 201
    r = await put_workflow(api, keys["default"], "private", "secret")
    assert r.status_code == 201, r.text
    assert (r.json()["owner"], r.json()["shared"]) == ("default", False)
    # Another tenant: no read, no list, no run, and its own definitions are what it checks against.
    r = await api.http.get("/v1/workflows/private", headers=keys["acme"])
    assert r.status_code == 404
    listed = (await api.http.get("/v1/workflows", headers=keys["acme"])).json()["items"]
    assert listed == []
    run = {"workflow": "private", "inputs": {}}
    r = await api.http.post("/v1/workflow-runs", json=run, headers=keys["acme"])
    assert r.status_code == 404
    r = await put_workflow(api, keys["acme"], "mine", "secret")
    assert r.status_code == 422  # default's "secret" is not a definition acme can use
    # Shared: only the operator publishes; every tenant reads and runs it; the name is reserved.
    r = await put_workflow(api, keys["acme"], "hello", "greet", shared=True)
    assert r.status_code == 403 and "operator" in r.json()["error"]["message"]
    r = await put_workflow(api, keys["operator"], "hello", "greet", shared=True)
    assert r.status_code == 201, r.text
    assert r.json()["shared"] is True
    got = await api.http.get("/v1/workflows/hello", headers=keys["acme"])
    assert got.status_code == 200 and got.json()["shared"] is True
    r = await api.http.post(
        "/v1/workflow-runs", json={"workflow": "hello", "inputs": {}}, headers=keys["acme"]
    )
    assert r.status_code == 201, r.text
    r = await put_workflow(api, keys["acme"], "hello", "greet", version=2)
    assert r.status_code == 409
    assert "hello is a shared workflow; choose another name" in r.json()["error"]["message"]
    # A shared workflow's tasks must be shared definitions.
    r = await put_workflow(api, keys["operator"], "leaky", "secret", shared=True)
    assert r.status_code == 422


async def test_cron_jobs_resolve_definitions_and_workflows_for_their_tenant(
    api: Api, keys: dict[str, dict[str, str]]
) -> None:
    assert (await put(api, secret_doc(), keys["default"])).status_code == 201
    assert (await put_workflow(api, keys["default"], "private", "secret")).status_code == 201
    job = {
        "name": "steal",
        "definitionUri": "registry://jobs/secret",
        "expression": "0 2 * * *",
        "timezone": "UTC",
        "inputs": {"name": "x"},
    }
    r = await api.http.post("/v1/cron-jobs", json=job, headers=keys["acme"])
    assert r.status_code == 422 and "no definition is registered" in r.json()["error"]["message"]
    del job["definitionUri"]
    r = await api.http.post(
        "/v1/cron-jobs", json={**job, "workflow": {"name": "private"}}, headers=keys["acme"]
    )
    assert r.status_code == 422 and "no workflow is registered" in r.json()["error"]["message"]
    r = await api.http.post(
        "/v1/cron-jobs",
        json=job | {"definitionUri": "registry://jobs/secret"},
        headers=keys["default"],
    )
    assert r.status_code == 201, r.text
