"""Tenant weights in the fair claim over HTTP, on both backends: only an operator key sets
them (a tenant raising its own would take the others' share), hostile values are a 422 that
changes nothing, and two backlogged tenants of weights 3 and 1 share claims 3:1."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.api.conftest import Api
from tests.factories import T0, new_execution
from tickwheel.client.client import AsyncClient
from tickwheel.client.transports.http import HttpTransport
from tickwheel.domain.errors import Forbidden
from tickwheel.domain.models import Scope

LEASE = timedelta(seconds=30)


async def test_an_operator_weighs_a_tenant_and_claims_follow_it(api: Api) -> None:
    r = await api.http.put("/v1/tenant/weight", json={"weight": 3})
    assert r.status_code == 403  # the tenant's own admin key
    operator = await api.key(Scope.OPERATOR, tenant="ops")
    r = await api.http.put(
        "/v1/tenant/weight", json={"weight": 3}, params={"tenant": "acme"}, headers=operator
    )
    assert r.status_code == 200, r.text
    assert r.json()["tenant"] == "acme" and r.json()["weight"] == 3
    assert (await api.http.get("/v1/tenant/flow")).json()["weight"] == 3
    await api.store.execution_insert_many([new_execution("acme") for _ in range(100)])
    await api.store.execution_insert_many([new_execution("globex") for _ in range(100)])
    counts = {"acme": 0, "globex": 0}
    for _ in range(5):
        for e in await api.store.execution_claim_ready("w", 16, LEASE, T0):
            counts[e.tenant] += 1
    assert counts == {"acme": 60, "globex": 20}
    r = await api.http.delete("/v1/tenant/weight", params={"tenant": "acme"}, headers=operator)
    assert r.status_code == 200 and r.json()["weight"] == 1


@pytest.mark.parametrize("body", [{"weight": 0}, {"weight": 101}, {"weight": -1},
                                  {"weight": "3"}, {"weight": 2.5}, {"weight": True}, {},
                                  {"weight": 2, "x": 1}])  # fmt: skip
async def test_a_hostile_weight_is_a_422_and_changes_nothing(api: Api, body: Any) -> None:
    operator = await api.key(Scope.OPERATOR, tenant="ops")
    r = await api.http.put(
        "/v1/tenant/weight", json={"weight": 2}, params={"tenant": "acme"}, headers=operator
    )
    assert r.status_code == 200
    r = await api.http.put(
        "/v1/tenant/weight", json=body, params={"tenant": "acme"}, headers=operator
    )
    assert r.status_code == 422, (body, r.text)
    assert await api.store.tenant_weight_get("acme") == 2


async def test_the_sdk_over_http(api: Api) -> None:
    operator = await api.key(Scope.OPERATOR, tenant="ops")
    secret = operator["Authorization"].split()[1]
    client = AsyncClient(
        transport=HttpTransport("http://testserver", secret, http=api.http, backoff=0)
    )
    assert (await client.flow.weigh_tenant(4, tenant="acme")).weight == 4
    assert (await client.flow.weigh_tenant(None, tenant="acme")).weight == 1
    admin = AsyncClient(
        transport=HttpTransport("http://testserver", api.admin_key, http=api.http, backoff=0)
    )
    with pytest.raises(Forbidden):
        await admin.flow.weigh_tenant(2)
