from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.api.conftest import Api
from tests.factories import T0, definition_doc
from tickwheel.domain.models import Scope
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.store.protocol import AttemptResult

BODY = {"definitionUri": "registry://jobs/greet", "inputs": {"name": "Ada"}}


@pytest.fixture(autouse=True)
async def greet(api: Api) -> None:
    r = await api.http.put("/v1/definitions", json=definition_doc())
    assert r.status_code == 201


async def submit(
    api: Api, body: dict[str, Any] | None = None, key: str | None = None, **kw: Any
) -> Any:
    headers = {"Idempotency-Key": key} if key else {}
    return await api.http.post("/v1/executions", json=body or BODY, headers=headers, **kw)


async def count(api: Api) -> int:
    return len((await api.http.get("/v1/executions", params={"limit": 500})).json()["items"])


async def test_submit_due_now_and_later(api: Api) -> None:
    r = await submit(api)
    assert r.status_code == 201, r.text
    e = r.json()
    assert e["status"] == "READY"
    assert e["definitionVersion"] == 1
    assert e["inputs"] == {"name": "Ada", "times": 1}
    assert e["executeAt"] == "2026-03-01T12:00:00Z"
    assert e["maxAttempts"] == 4 and e["attemptCount"] == 0
    later = await submit(api, BODY | {"executeAt": "2026-03-01T14:00:05+02:00", "priority": 3})
    assert later.status_code == 201
    assert later.json()["status"] == "SCHEDULED"
    assert later.json()["executeAt"] == "2026-03-01T12:00:05Z"
    got = await api.http.get(f"/v1/executions/{e['executionId']}")
    assert got.status_code == 200 and got.json() == e


async def test_same_key_same_body_returns_the_original(api: Api) -> None:
    first = await submit(api, key="order-42")
    again = await submit(api, key="order-42")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["executionId"] == first.json()["executionId"]
    assert await count(api) == 1


async def test_same_key_different_body_is_409_naming_the_key(api: Api) -> None:
    await submit(api, key="order-42")
    r = await submit(api, BODY | {"inputs": {"name": "Bob"}}, key="order-42")
    assert r.status_code == 409
    assert "order-42" in r.json()["error"]["message"]
    assert await count(api) == 1


async def test_without_a_key_there_is_no_dedup(api: Api) -> None:
    await submit(api)
    await submit(api)
    assert await count(api) == 2


@pytest.mark.parametrize(
    ("body", "paths"),
    [
        (BODY | {"inputs": {"name": 5, "extra": 1}}, {"inputs.name", "inputs.extra"}),
        (BODY | {"inputs": {}}, {"inputs.name"}),
        (BODY | {"definitionUri": "registry://jobs/unknown"}, {"definitionUri"}),
        (BODY | {"definitionUri": "http://x/y"}, {"definitionUri"}),
        (BODY | {"definitionVersion": 7}, {"definitionUri"}),
        (BODY | {"definitionVersion": "1"}, {"definitionVersion"}),
        (BODY | {"executeAt": "2026-03-01T12:00:00"}, {"executeAt"}),
        (BODY | {"executeAt": "2030-01-01T00:00:00Z"}, {"executeAt"}),
        (BODY | {"executeAt": "2026-02-01T00:00:00Z"}, {"executeAt"}),
        (BODY | {"priority": 1000}, {"priority"}),
        (BODY | {"bogus": 1}, {"bogus"}),
        ({"inputs": {}}, {"definitionUri"}),
    ],
)
async def test_invalid_submissions_are_422_and_store_nothing(
    api: Api, body: dict[str, Any], paths: set[str]
) -> None:
    r = await submit(api, body)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_input"
    assert {d["path"] for d in error["details"]} == paths
    assert await count(api) == 0


async def test_unreadable_and_oversized_bodies(api: Api) -> None:
    r = await api.http.post(
        "/v1/executions", content=b"{nope", headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "bad_request"
    huge = BODY | {"inputs": {"name": "x" * 70_000}}
    r = await submit(api, huge)
    assert r.status_code == 413
    assert "limit" in r.json()["error"]["message"]
    assert await count(api) == 0


async def test_auth_is_required_and_scoped(api: Api) -> None:
    r = await api.http.post("/v1/executions", json=BODY, headers={"Authorization": ""})
    assert r.status_code == 401
    r = await api.http.get("/v1/executions", headers={"Authorization": "Bearer tw_nope"})
    assert r.status_code == 401
    r = await api.http.get("/v1/executions", headers={"Authorization": "Basic abc"})
    assert r.status_code == 401
    read = await api.key(Scope.READ)
    assert (await api.http.post("/v1/executions", json=BODY, headers=read)).status_code == 403
    submitter = await api.key(Scope.SUBMIT)
    assert (await api.http.post("/v1/executions", json=BODY, headers=submitter)).status_code == 201
    assert await count(api) == 1


async def test_tenants_cannot_see_or_cancel_each_other(api: Api) -> None:
    e = (await submit(api)).json()
    other = await api.key(Scope.ADMIN, tenant="globex")
    path = f"/v1/executions/{e['executionId']}"
    assert (await api.http.get(path, headers=other)).status_code == 404
    assert (await api.http.delete(path, headers=other)).status_code == 404
    assert (await api.http.get(path + "/attempts", headers=other)).status_code == 404
    assert (await api.http.get("/v1/executions", headers=other)).json()["items"] == []
    assert (await api.http.get(path)).json()["status"] == "READY"


async def test_cancel_then_cancel_again(api: Api) -> None:
    e = (await submit(api, BODY | {"executeAt": "2026-03-01T13:00:00Z"})).json()
    path = f"/v1/executions/{e['executionId']}"
    r = await api.http.delete(path)
    assert r.status_code == 200 and r.json()["status"] == "CANCELLED"
    again = await api.http.delete(path)
    assert again.status_code == 409
    assert "already finished (CANCELLED)" in again.json()["error"]["message"]
    history = (await api.http.get(path + "/history")).json()["items"]
    assert [h["kind"] for h in history] == ["cancelled"]


async def test_a_running_execution_is_asked_to_stop(api: Api) -> None:
    e = (await submit(api)).json()
    await api.store.execution_claim_ready("w1", 1, timedelta(seconds=30), T0)
    r = await api.http.delete(f"/v1/executions/{e['executionId']}")
    assert r.status_code == 200
    assert r.json()["status"] == "RUNNING" and r.json()["cancelRequestedAt"]
    # Its worker stops it; until then the attempt runs on.
    attempts = (await api.http.get(f"/v1/executions/{e['executionId']}/attempts")).json()["items"]
    assert [(a["attemptNumber"], a["workerId"], a["status"]) for a in attempts] == [
        (1, "w1", "RUNNING")
    ]


async def test_replay_a_dead_letter(api: Api) -> None:
    e = (await submit(api)).json()
    path = f"/v1/executions/{e['executionId']}"
    assert (await api.http.post(path + "/replay")).status_code == 409
    [claimed] = await api.store.execution_claim_ready("w1", 1, timedelta(seconds=30), T0)
    assert claimed.fencing_token is not None
    await api.store.attempt_finish(
        AttemptResult(
            claimed.execution_id,
            claimed.fencing_token,
            AttemptStatus.FAILED,
            ExecutionStatus.FAILED,
            error={"kind": "permanent", "message": "bad input file"},
        ),
        T0,
    )
    assert (await api.http.get(path)).json()["status"] == "FAILED"
    r = await api.http.post(path + "/replay")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "READY"
    assert r.json()["maxAttempts"] == 1 + 4
    history = (await api.http.get(path + "/history")).json()["items"]
    assert history[0]["kind"] == "replayed"
    assert history[0]["detail"]["error"]["message"] == "bad input file"


async def test_list_filters_and_pages(api: Api) -> None:
    for i in range(5):
        at = (T0 + timedelta(minutes=i)).isoformat()
        await submit(api, BODY | {"executeAt": at})
    page = (await api.http.get("/v1/executions", params={"limit": 2})).json()
    assert len(page["items"]) == 2 and page["nextCursor"]
    seen = [i["executionId"] for i in page["items"]]
    while page["nextCursor"]:
        page = (
            await api.http.get("/v1/executions", params={"limit": 2, "cursor": page["nextCursor"]})
        ).json()
        seen += [i["executionId"] for i in page["items"]]
    assert len(seen) == len(set(seen)) == 5
    assert seen == sorted(seen, reverse=True)
    scheduled = (await api.http.get("/v1/executions", params={"status": "scheduled,READY"})).json()
    assert len(scheduled["items"]) == 5
    window = {"executeFrom": "2026-03-01T12:01:00Z", "executeTo": "2026-03-01T12:03:00Z"}
    assert len((await api.http.get("/v1/executions", params=window)).json()["items"]) == 2
    assert (
        len((await api.http.get("/v1/executions", params={"definition": "greet"})).json()["items"])
        == 5
    )
    bad = await api.http.get("/v1/executions", params={"status": "DONE"})
    assert bad.status_code == 422 and "DONE" in bad.json()["error"]["message"]
    assert (await api.http.get("/v1/executions", params={"cursor": "!!"})).status_code == 400
    assert (await api.http.get("/v1/executions", params={"limit": 0})).status_code == 422


async def test_batch_has_per_item_results(api: Api) -> None:
    await submit(api, key="taken")
    items = [
        BODY | {"idempotencyKey": "b-1"},
        BODY | {"idempotencyKey": "b-1"},
        BODY | {"idempotencyKey": "taken", "inputs": {"name": "Zed"}},
        BODY | {"inputs": {"name": 3}},
        BODY | {"executeAt": "2026-03-01T12:30:00Z"},
    ]
    r = await api.http.post("/v1/executions/batch", json={"items": items})
    assert r.status_code == 200, r.text
    results = r.json()["items"]
    assert [x["status"] for x in results] == [201, 200, 409, 422, 201]
    assert results[0]["execution"]["executionId"] == results[1]["execution"]["executionId"]
    assert results[3]["error"]["details"][0]["path"] == "inputs.name"
    assert await count(api) == 3
    too_many = {"items": [BODY] * 1001}
    r = await api.http.post("/v1/executions/batch", json=too_many)
    assert r.status_code in (413, 422)


async def test_unknown_routes_and_ids(api: Api) -> None:
    r = await api.http.get("/v1/executions/0190b4a4-0000-7000-8000-000000000000")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"
    assert (await api.http.get("/v1/executions/not-a-uuid")).status_code == 422
    assert (await api.http.get("/v1/nothing")).status_code == 404


async def test_health_readiness_and_openapi(api: Api) -> None:
    assert (await api.http.get("/healthz")).json() == {"status": "ok"}
    ready = (await api.http.get("/readyz")).json()
    assert ready["status"] == "ok"
    spec = (await api.http.get("/openapi.json")).json()
    assert "/v1/executions" in spec["paths"]


async def test_output_route(api: Api) -> None:
    e = (await submit(api)).json()
    path = f"/v1/executions/{e['executionId']}/output"
    r = await api.http.get(path)
    assert r.status_code == 200
    assert r.json() == {"output": None, "outputReference": None}
    other = await api.key(Scope.READ, tenant="globex")
    assert (await api.http.get(path, headers=other)).status_code == 404
