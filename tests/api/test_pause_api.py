"""Pause and resume over HTTP, on both backends: a paused definition's due executions stay
READY and are claimed once it is resumed; a tenant can never pause (nor read the state of)
another tenant's definition: 404, as for an unknown one; the tenant-wide pause is admin-scoped
and an operator key alone may name another tenant."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.api.conftest import Api
from tests.factories import T0, definition_doc
from tickwheel.client.client import AsyncClient
from tickwheel.client.transports.http import HttpTransport
from tickwheel.domain.errors import Forbidden, NotFound
from tickwheel.domain.models import Scope
from tickwheel.domain.states import ExecutionStatus

LEASE = timedelta(seconds=30)


async def submit(api: Api, name: str, key: dict[str, str] | None = None) -> str:
    body = {"definitionUri": f"registry://jobs/{name}", "inputs": {"name": "Ada"}}
    r = await api.http.post("/v1/executions", json=body, headers=key or {})
    assert r.status_code == 201, r.text
    return str(r.json()["executionId"])


@pytest.fixture
async def greet(api: Api) -> None:
    r = await api.http.put("/v1/definitions", json=definition_doc("greet"))
    assert r.status_code == 201, r.text


@pytest.mark.usefixtures("greet")
async def test_pause_holds_due_executions_ready_and_resume_releases_them(api: Api) -> None:
    r = await api.http.post("/v1/definitions/greet/pause", json={"reason": "vendor outage"})
    assert r.status_code == 200, r.text
    state = r.json()
    assert state["definition"] == "greet" and state["paused"] is True
    [pause] = state["pauses"]
    assert pause == {
        "definition": "greet",
        "kind": "manual",
        "reason": "vendor outage",
        "pausedAt": "2026-03-01T12:00:00Z",
    }
    execution_id = await submit(api, "greet")
    assert await api.store.execution_claim_ready("w1", 10, LEASE, T0) == []
    r = await api.http.get(f"/v1/executions/{execution_id}")
    assert r.json()["status"] == str(ExecutionStatus.READY)

    r = await api.http.get("/v1/definitions/greet/flow")
    assert r.status_code == 200 and r.json()["paused"] is True
    r = await api.http.post("/v1/definitions/greet/resume")
    assert r.status_code == 200 and r.json()["paused"] is False and r.json()["pauses"] == []
    [claimed] = await api.store.execution_claim_ready("w1", 10, LEASE, T0)
    assert str(claimed.execution_id) == execution_id


@pytest.mark.usefixtures("greet")
async def test_a_tenant_cannot_pause_another_tenants_definition(api: Api) -> None:
    globex = await api.key(Scope.ADMIN, tenant="globex")
    r = await api.http.put("/v1/definitions", json=definition_doc("payroll"), headers=globex)
    assert r.status_code == 201, r.text
    # acme (the client's default key) aims at globex's definition: it does not exist for acme.
    for path in ("pause", "resume", "flow"):
        method = api.http.get if path == "flow" else api.http.post
        r = await method(f"/v1/definitions/payroll/{path}")
        assert r.status_code == 404, (path, r.text)
        assert r.json()["error"]["message"] == "no definition named 'payroll'"
    assert await api.store.pause_list("globex") == []
    assert await api.store.pause_list("acme") == []
    # The same key pauses its own definition: the 404 above is the tenant boundary, not a
    # missing route.
    r = await api.http.post("/v1/definitions/greet/pause")
    assert r.status_code == 200, r.text
    await api.http.post("/v1/definitions/greet/resume")
    # globex's own executions still run.
    await submit(api, "payroll", globex)
    assert len(await api.store.execution_claim_ready("w1", 10, LEASE, T0)) == 1


@pytest.mark.usefixtures("greet")
async def test_bad_input_is_refused_and_changes_nothing(api: Api) -> None:
    cases = [
        ("/v1/definitions/greet/pause", {"reason": "x" * 501}, 422),
        ("/v1/definitions/greet/pause", {"reason": 7}, 422),
        ("/v1/definitions/greet/pause", {"reason": "a\u0000b"}, 422),
        ("/v1/definitions/greet/pause", {"why": "typo"}, 422),
        ("/v1/definitions/UPPER/pause", {}, 404),
        ("/v1/definitions/nope/pause", {}, 404),
    ]
    for path, body, status in cases:
        r = await api.http.post(path, json=body)
        assert r.status_code == status, (body, r.text)
    assert await api.store.pause_list("acme") == []
    reader = await api.key(Scope.READ)
    r = await api.http.post("/v1/definitions/greet/pause", headers=reader)
    assert r.status_code == 403
    r = await api.http.post("/v1/tenant/pause", headers=reader)
    assert r.status_code == 403
    assert await api.store.pause_list("acme") == []


@pytest.mark.usefixtures("greet")
async def test_the_tenant_pause_is_the_keys_own_unless_an_operator_names_another(
    api: Api,
) -> None:
    r = await api.http.post("/v1/tenant/pause", json={"reason": "billing"})
    assert r.status_code == 200, r.text
    assert r.json()["tenant"] == "acme" and r.json()["paused"] is True
    await submit(api, "greet")
    assert await api.store.execution_claim_ready("w1", 10, LEASE, T0) == []
    r = await api.http.get("/v1/definitions/greet/flow")
    assert r.json()["paused"] is True  # held by the tenant's pause
    assert r.json()["pauses"][0]["definition"] is None

    r = await api.http.post("/v1/tenant/pause", params={"tenant": "globex"})
    assert r.status_code == 403  # an admin of acme is no operator
    assert await api.store.pause_list("globex") == []
    operator = await api.key(Scope.OPERATOR, tenant="ops")
    r = await api.http.post("/v1/tenant/pause", params={"tenant": "globex"}, headers=operator)
    assert r.status_code == 200 and r.json()["tenant"] == "globex"
    r = await api.http.post("/v1/tenant/resume", params={"tenant": "globex"}, headers=operator)
    assert r.json()["paused"] is False

    r = await api.http.post("/v1/tenant/resume")
    assert r.status_code == 200 and r.json()["paused"] is False
    assert len(await api.store.execution_claim_ready("w1", 10, LEASE, T0)) == 1


async def test_the_sdk_over_http_answers_typed_models(api: Api) -> None:
    await api.http.put("/v1/definitions", json=definition_doc("greet"))
    transport = HttpTransport("http://testserver", api.admin_key, http=api.http, backoff=0)
    client = AsyncClient(transport=transport)
    paused = await client.flow.pause("greet", "vendor outage")
    assert paused.paused and paused.pauses[0].kind == "manual"
    state = await client.flow.state("greet")
    assert state.pauses[0].paused_at == api.clock.now()
    assert (await client.flow.tenant_state()).pauses == state.pauses
    assert not (await client.flow.resume("greet")).paused
    assert (await client.flow.pause_tenant()).paused
    assert not (await client.flow.resume_tenant()).paused
    with pytest.raises(NotFound):
        await client.flow.pause("payroll")
    with pytest.raises(Forbidden):
        await client.flow.pause_tenant(tenant="globex")
    reader = await api.key(Scope.READ)
    read_only = AsyncClient(
        transport=HttpTransport(
            "http://testserver", reader["Authorization"].split()[1], http=api.http, backoff=0
        )
    )
    with pytest.raises(Forbidden):
        await read_only.flow.pause("greet")
