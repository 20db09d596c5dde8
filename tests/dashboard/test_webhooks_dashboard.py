"""The Webhooks page on both backends: the tenant's subscriptions with masked secrets and their
deliveries; another tenant's are not shown; values are escaped."""

from __future__ import annotations

from contextlib import aclosing

from tests.dashboard.conftest import Dash
from tests.store.test_webhooks import _dead_letter
from tickwheel.domain.models import Scope


async def test_the_page_lists_the_tenants_webhooks_and_their_deliveries(dash: Dash) -> None:
    async with aclosing(dash.api()) as api:
        hook = {
            "url": "https://hooks.example.com/tw",
            "events": ["execution.failed"],
            "description": "<b>pager</b>",
        }
        made = (await api.post("/v1/webhooks", json=hook)).json()
        other = dash.api(await dash.key(Scope.ADMIN, tenant="globex"))
        async with aclosing(other):
            theirs = {**hook, "url": "https://globex.example.com/secret-hook"}
            assert (await other.post("/v1/webhooks", json=theirs)).status_code == 201
    await _dead_letter(dash.store)
    http, _ = await dash.signed_in()
    async with aclosing(http):
        page = await http.get("/dashboard/webhooks")
    assert page.status_code == 200
    html = page.text
    assert f'data-webhook="{made["webhookId"]}"' in html
    assert made["secret"] not in html and f"whsec_…{made['secret'][-4:]}" in html
    assert 'data-status="PENDING"' in html and "execution.failed" in html
    assert "&lt;b&gt;pager&lt;/b&gt;" in html and "<b>pager</b>" not in html
    assert "globex.example.com" not in html
    assert 'href="/dashboard/webhooks" aria-current="page"' in html


async def test_the_page_says_how_to_add_one(dash: Dash) -> None:
    http, _ = await dash.signed_in()
    async with aclosing(http):
        page = await http.get("/dashboard/webhooks")
    assert page.status_code == 200 and "No webhook yet" in page.text
