"""``/v1/webhooks`` on both backends: the secret shown once, unsafe URLs refused with 422, a
tenant never sees another's webhooks (404), and the deliveries of a subscription listed."""

from __future__ import annotations

import uuid

import pytest

from tests.api.conftest import Api
from tests.store.test_webhooks import _dead_letter
from tickwheel.client.client import AsyncClient
from tickwheel.client.transports.http import HttpTransport
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.domain.errors import InvalidInput, NotFound
from tickwheel.domain.models import Scope

HOOK = {"url": "https://hooks.example.com/tw", "events": ["execution.failed"]}


async def test_add_shows_the_secret_once_then_masks_it(api: Api) -> None:
    r = await api.http.post("/v1/webhooks", json={**HOOK, "description": "pager"})
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["secret"].startswith("whsec_") and len(made["secret"]) > 30
    assert made["events"] == ["execution.failed"] and made["description"] == "pager"
    masked = f"whsec_…{made['secret'][-4:]}"
    listed = (await api.http.get("/v1/webhooks")).json()["items"]
    assert [(w["webhookId"], w["secret"]) for w in listed] == [(made["webhookId"], masked)]
    one = (await api.http.get(f"/v1/webhooks/{made['webhookId']}")).json()
    assert one["secret"] == masked
    gone = await api.http.delete(f"/v1/webhooks/{made['webhookId']}")
    assert gone.status_code == 200 and gone.json()["secret"] == masked
    assert (await api.http.get("/v1/webhooks")).json()["items"] == []
    assert (await api.http.delete(f"/v1/webhooks/{made['webhookId']}")).status_code == 404


async def test_unsafe_urls_and_bad_events_are_refused_and_change_nothing(api: Api) -> None:
    for url, words in [
        ("http://127.0.0.1:8080/hook", "a loopback address"),
        ("http://localhost/hook", "a loopback address"),
        ("http://169.254.169.254/latest", "link-local"),
        ("http://10.1.2.3/hook", "a private address"),
        ("http://0x7f.1/hook", "a loopback address"),
        ("http://[::ffff:192.168.0.1]/", "a private address"),
        ("ftp://hooks.example.com/", "only http and https"),
        ("https://user:pw@hooks.example.com/", "credentials"),
    ]:
        r = await api.http.post("/v1/webhooks", json={**HOOK, "url": url})
        assert r.status_code == 422, url
        error = r.json()["error"]
        assert words in error["message"], (url, error)
        assert error["details"][0]["path"] == "url"
    r = await api.http.post("/v1/webhooks", json={**HOOK, "events": ["execution.done"]})
    assert r.status_code == 422 and "unknown event 'execution.done'" in r.json()["error"]["message"]
    r = await api.http.post("/v1/webhooks", json={**HOOK, "events": []})
    assert r.status_code == 422
    assert (await api.http.get("/v1/webhooks")).json()["items"] == []


async def test_a_tenant_never_sees_another_tenants_webhooks(api: Api) -> None:
    globex = await api.key(Scope.ADMIN, tenant="globex")
    theirs = (await api.http.post("/v1/webhooks", json=HOOK, headers=globex)).json()
    wid = theirs["webhookId"]
    assert (await api.http.get("/v1/webhooks")).json()["items"] == []
    for method, path in [
        ("GET", f"/v1/webhooks/{wid}"),
        ("DELETE", f"/v1/webhooks/{wid}"),
        ("GET", f"/v1/webhooks/{wid}/deliveries"),
        ("GET", f"/v1/webhooks/{uuid.uuid4()}"),
        ("GET", "/v1/webhooks/not-a-uuid"),
    ]:
        r = await api.http.request(method, path)
        assert r.status_code == 404, (method, path)
        assert r.json()["error"]["code"] == "not_found"
    assert (await api.http.get(f"/v1/webhooks/{wid}", headers=globex)).status_code == 200


async def test_scopes_and_the_deliveries_of_a_subscription(api: Api) -> None:
    read = await api.key(Scope.READ)
    assert (await api.http.post("/v1/webhooks", json=HOOK, headers=read)).status_code == 403
    wid = (await api.http.post("/v1/webhooks", json=HOOK)).json()["webhookId"]
    execution_id = await _dead_letter(api.store)
    r = await api.http.get(f"/v1/webhooks/{wid}/deliveries", headers=read)
    assert r.status_code == 200
    [delivery] = r.json()["items"]
    assert delivery["event"] == "execution.failed" and delivery["status"] == "PENDING"
    assert delivery["attempts"] == 0 and delivery["responseCode"] is None
    assert delivery["payload"]["executionId"] == str(execution_id)
    assert (await api.http.delete(f"/v1/webhooks/{wid}", headers=read)).status_code == 403


async def test_the_sdk_manages_webhooks(api: Api) -> None:
    """``client.webhooks`` over the HTTP transport: the same models, the API's refusals."""
    transport = HttpTransport("http://testserver", api.admin_key, http=api.http, backoff=0)
    client = AsyncClient(transport=transport)
    made = await client.webhooks.add(HOOK["url"], ["execution.failed", "cron.missed"], "ops")
    assert made.secret.startswith("whsec_") and made.events == ["execution.failed", "cron.missed"]
    [listed] = await client.webhooks.list()
    assert listed.webhook_id == made.webhook_id and listed.secret.startswith("whsec_…")
    assert (await client.webhooks.get(str(made.webhook_id))).url == HOOK["url"]
    await _dead_letter(api.store)
    [delivery] = await client.webhooks.deliveries(made.webhook_id, limit=5)
    assert (delivery.event, delivery.status) == ("execution.failed", "PENDING")
    with pytest.raises(InvalidInput, match="a private address"):
        await client.webhooks.add("http://192.168.1.10/", ["execution.failed"])
    assert (await client.webhooks.remove(made.webhook_id)).webhook_id == made.webhook_id
    with pytest.raises(NotFound):
        await client.webhooks.get(made.webhook_id)
    with pytest.raises(RuntimeError, match="use HTTP"):
        await AsyncClient(transport=InProcessTransport(api.store, "acme")).webhooks.list()
