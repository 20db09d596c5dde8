from __future__ import annotations

import json

from tests.api.conftest import Api
from tests.factories import definition_doc
from tickwheel.domain.models import Scope

YAML = """
name: report
version: 1
inputs:
  report_date: date
outputs:
  rows: integer
execution:
  type: command
  argv: ["python3", "-c", "print(1)"]
timeout: 30
"""

XML = """<definition><name>report</name><version>2</version>
<inputs><input name="report_date" type="date"/></inputs>
<execution type="command"><arg>python3</arg></execution></definition>"""


async def put(api: Api, body: str, content_type: str, **headers: str) -> object:
    return await api.http.put(
        "/v1/definitions", content=body, headers={"Content-Type": content_type, **headers}
    )


async def test_apply_in_each_format_then_read_back(api: Api) -> None:
    r = await api.http.put(
        "/v1/definitions", content=YAML, headers={"Content-Type": "application/yaml"}
    )
    assert r.status_code == 201, r.text
    assert r.json()["uri"] == "registry://jobs/report"
    r = await api.http.put(
        "/v1/definitions", content=XML, headers={"Content-Type": "application/xml"}
    )
    assert r.status_code == 201, r.text
    r = await api.http.put("/v1/definitions", json=definition_doc("greet"))
    assert r.status_code == 201, r.text

    listed = (await api.http.get("/v1/definitions")).json()["items"]
    assert [(d["name"], d["version"]) for d in listed] == [("greet", 1), ("report", 2)]
    versions = (await api.http.get("/v1/definitions/report")).json()["items"]
    assert [v["version"] for v in versions] == [1, 2]
    one = (await api.http.get("/v1/definitions/report/versions/1")).json()
    assert one["inputs"]["report_date"]["type"] == "date"
    assert one["execution"]["argv"] == ["python3", "-c", "print(1)"]


async def test_identical_content_again_is_a_no_op(api: Api) -> None:
    first = await api.http.put(
        "/v1/definitions", content=YAML, headers={"Content-Type": "text/yaml"}
    )
    assert first.status_code == 201
    same = await api.http.put(
        "/v1/definitions", content=YAML, headers={"Content-Type": "text/yaml"}
    )
    assert same.status_code == 200
    assert same.json()["contentHash"] == first.json()["contentHash"]


async def test_different_content_under_a_version_is_409_naming_the_fields(api: Api) -> None:
    await api.http.put(
        "/v1/definitions", content=YAML, headers={"Content-Type": "application/yaml"}
    )
    changed = YAML.replace("timeout: 30", "timeout: 60").replace("rows: integer", "rows: string")
    r = await api.http.put(
        "/v1/definitions", content=changed, headers={"Content-Type": "application/yaml"}
    )
    assert r.status_code == 409
    error = r.json()["error"]
    assert error["code"] == "conflict"
    assert "timeout" in error["message"] and "outputs.rows" in error["message"]
    assert error["details"]["differingFields"] == ["outputs.rows.type", "timeout"]
    stored = (await api.http.get("/v1/definitions/report/versions/1")).json()
    assert stored["timeout"] == 30


async def test_bad_definitions_are_rejected_and_store_nothing(api: Api) -> None:
    r = await api.http.put(
        "/v1/definitions", content="name: [", headers={"Content-Type": "application/yaml"}
    )
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "bad_request"
    bad = definition_doc("greet", 0, retry={"maxAttempts": 0})
    r = await api.http.put("/v1/definitions", json=bad)
    assert r.status_code == 422
    paths = {d["path"] for d in r.json()["error"]["details"]}
    assert {"version", "retry.maxAttempts"} <= paths
    r = await api.http.put("/v1/definitions", content="x", headers={"Content-Type": "text/plain"})
    assert r.status_code == 400
    assert "application/json" in r.json()["error"]["message"]
    assert (await api.http.get("/v1/definitions")).json()["items"] == []


async def test_only_admins_register_definitions(api: Api) -> None:
    for scope in (Scope.SUBMIT, Scope.READ):
        headers = await api.key(scope)
        r = await api.http.put(
            "/v1/definitions",
            content=json.dumps(definition_doc()),
            headers={**headers, "Content-Type": "application/json"},
        )
        assert r.status_code == 403
        assert "admin" in r.json()["error"]["message"]
    assert (
        await api.http.get("/v1/definitions", headers=await api.key(Scope.READ))
    ).status_code == 200


async def test_unknown_definition_is_404(api: Api) -> None:
    assert (await api.http.get("/v1/definitions/nope")).status_code == 404
    await api.http.put("/v1/definitions", json=definition_doc())
    r = await api.http.get("/v1/definitions/greet/versions/9")
    assert r.status_code == 404
    assert "version 9" in r.json()["error"]["message"]
