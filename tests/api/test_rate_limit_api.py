"""Rate limits over HTTP, on both backends: a definition's ``rateLimit`` (its file) makes a
bucket per tenant at its first submission and the claim honours it; a tenant's own limit is set,
read and lifted through ``/v1/tenant/rate-limit``; hostile input is a 422 that names the field
and changes nothing; the flow answers show each limit with its tokens now."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from typing import Any

import pytest

from tests.api.conftest import Api
from tests.factories import T0, definition_doc
from tickwheel.client.client import AsyncClient
from tickwheel.client.transports.http import HttpTransport
from tickwheel.domain.errors import Forbidden, InvalidInput
from tickwheel.domain.models import Scope

LEASE = timedelta(seconds=30)


async def submit(api: Api, name: str, n: int = 1) -> None:
    for _ in range(n):
        body = {"definitionUri": f"registry://jobs/{name}", "inputs": {"name": "Ada"}}
        r = await api.http.post("/v1/executions", json=body)
        assert r.status_code == 201, r.text


async def test_a_definitions_rate_limit_holds_its_starts_and_shows_its_use(api: Api) -> None:
    doc = definition_doc("greet", rateLimit={"limit": 2, "period": "1s", "burst": 3})
    r = await api.http.put("/v1/definitions", json=doc)
    assert r.status_code == 201, r.text
    assert r.json()["rateLimit"] == {"limit": 2, "period": "1s", "burst": 3}
    await submit(api, "greet", 5)
    assert len(await api.store.execution_claim_ready("w1", 10, LEASE, T0)) == 3  # the burst
    assert await api.store.execution_claim_ready("w1", 10, LEASE, T0) == []
    r = await api.http.get("/v1/definitions/greet/flow")
    assert r.status_code == 200, r.text
    [limit] = r.json()["rateLimits"]
    assert limit == {
        "definition": "greet",
        "limit": 2,
        "period": 1.0,
        "burst": 3,
        "tokens": 0.0,
        "at": "2026-03-01T12:00:00Z",
        "source": "definition",
        "definitionVersion": 1,
    }
    assert (
        len(await api.store.execution_claim_ready("w1", 10, LEASE, T0 + timedelta(seconds=1))) == 2
    )


@pytest.mark.parametrize(
    ("rate_limit", "field"),
    [
        ({"limit": 0}, "rateLimit.limit"),
        ({"limit": -5}, "rateLimit.limit"),
        ({"limit": 10**12}, "rateLimit.limit"),
        ({"limit": "10"}, "rateLimit.limit"),
        ({"limit": True}, "rateLimit.limit"),
        ({"limit": 1.5}, "rateLimit.limit"),
        ({"period": "1s"}, "rateLimit.limit"),
        ({"limit": 1, "period": 0}, "rateLimit.period"),
        ({"limit": 1, "period": "soon"}, "rateLimit.period"),
        ({"limit": 1, "period": "2d"}, "rateLimit.period"),
        ({"limit": 1, "period": 1e308}, "rateLimit.period"),
        ({"limit": 1, "burst": 0}, "rateLimit.burst"),
        ({"limit": 1, "every": 2}, "rateLimit.every"),
        ("10/s", "rateLimit"),
    ],
)
async def test_a_bad_rate_limit_in_a_definition_is_a_422_naming_it(
    api: Api, rate_limit: Any, field: str
) -> None:
    r = await api.http.put("/v1/definitions", json=definition_doc("greet", rateLimit=rate_limit))
    assert r.status_code == 422, r.text
    paths = [d["path"] for d in r.json()["error"]["details"]]
    assert field in paths, r.json()
    r = await api.http.get("/v1/definitions/greet")
    assert r.status_code == 404


async def test_the_tenant_limit_is_set_read_and_lifted(api: Api) -> None:
    await api.http.put("/v1/definitions", json=definition_doc("greet"))
    await api.http.put("/v1/definitions", json=definition_doc("other"))
    r = await api.http.put("/v1/tenant/rate-limit", json={"limit": 2, "period": "500ms"})
    assert r.status_code == 200, r.text
    [limit] = r.json()["rateLimits"]
    assert (limit["definition"], limit["limit"], limit["period"], limit["burst"]) == (
        None,
        2,
        0.5,
        2,
    )
    assert limit["source"] == "api" and "definitionVersion" not in limit
    await submit(api, "greet", 2)
    await submit(api, "other", 2)
    assert len(await api.store.execution_claim_ready("w1", 10, LEASE, T0)) == 2
    r = await api.http.get("/v1/tenant/rate-limit")
    assert r.status_code == 200 and r.json()["rateLimits"][0]["tokens"] == 0.0
    r = await api.http.get("/v1/definitions/other/flow")
    assert [x["definition"] for x in r.json()["rateLimits"]] == [None]  # the tenant's applies
    # Changed: the tokens stay (none), the new rate refills them.
    r = await api.http.put("/v1/tenant/rate-limit", json={"limit": 10, "burst": 1})
    assert r.status_code == 200 and r.json()["rateLimits"][0]["burst"] == 1
    assert await api.store.execution_claim_ready("w1", 10, LEASE, T0) == []
    r = await api.http.delete("/v1/tenant/rate-limit")
    assert r.status_code == 200 and r.json()["rateLimits"] == []
    assert len(await api.store.execution_claim_ready("w1", 10, LEASE, T0)) == 2


@pytest.mark.parametrize(
    "body",
    [
        {"limit": 0},
        {"limit": -1},
        {"limit": 10**9},
        {"limit": "10"},
        {"limit": True},
        {"limit": 2.5},
        {"limit": math.nan},
        {"limit": 1, "period": math.nan},
        {"limit": 1, "period": math.inf},
        {"limit": 1, "period": 0},
        {"limit": 1, "period": -1},
        {"limit": 1, "period": "fast"},
        {"limit": 1, "period": 10**6},
        {"limit": 1, "burst": 0},
        {"limit": 1, "burst": 10**9},
        {"limit": 1, "burst": "many"},
        {"limit": 1, "extra": 1},
        {},
        [],
        "10/s",
    ],
)
async def test_a_hostile_tenant_limit_is_a_422_and_changes_nothing(api: Api, body: Any) -> None:
    r = await api.http.put("/v1/tenant/rate-limit", json={"limit": 5})
    assert r.status_code == 200
    before = await api.store.rate_limit_list("acme", T0)
    # Raw text: NaN and Infinity as Python's json writes them (httpx refuses to).
    text = json.dumps(body)
    headers = {"content-type": "application/json"}
    r = await api.http.put("/v1/tenant/rate-limit", content=text, headers=headers)
    assert r.status_code == 422, (body, r.text)
    assert r.json()["error"]["message"]
    assert await api.store.rate_limit_list("acme", T0) == before


async def test_keys_and_tenants(api: Api) -> None:
    reader = await api.key(Scope.READ)
    r = await api.http.put("/v1/tenant/rate-limit", json={"limit": 5}, headers=reader)
    assert r.status_code == 403
    r = await api.http.delete("/v1/tenant/rate-limit", headers=reader)
    assert r.status_code == 403
    r = await api.http.get("/v1/tenant/rate-limit", headers=reader)
    assert r.status_code == 200
    r = await api.http.put("/v1/tenant/rate-limit", json={"limit": 5}, params={"tenant": "globex"})
    assert r.status_code == 403  # an admin of acme is no operator
    operator = await api.key(Scope.OPERATOR, tenant="ops")
    r = await api.http.put(
        "/v1/tenant/rate-limit", json={"limit": 5}, params={"tenant": "globex"}, headers=operator
    )
    assert r.status_code == 200 and r.json()["tenant"] == "globex"
    assert await api.store.rate_limit_list("acme", T0) == []
    assert len(await api.store.rate_limit_list("globex", T0)) == 1


async def test_the_sdk_over_http(api: Api) -> None:
    transport = HttpTransport("http://testserver", api.admin_key, http=api.http, backoff=0)
    client = AsyncClient(transport=transport)
    state = await client.flow.limit_tenant_rate(10, "1m", burst=3)
    [limit] = state.rate_limits
    assert (limit.limit, limit.period, limit.burst, limit.tokens) == (10, 60.0, 3, 3.0)
    assert (await client.flow.tenant_state()).rate_limits == state.rate_limits
    with pytest.raises(InvalidInput):
        await client.flow.limit_tenant_rate(0)
    with pytest.raises(Forbidden):
        await client.flow.limit_tenant_rate(1, tenant="globex")
    assert (await client.flow.unlimit_tenant_rate()).rate_limits == []
