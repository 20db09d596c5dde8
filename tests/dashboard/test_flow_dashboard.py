"""The definition page's flow panel: a Pause button (admin) that holds the definition back for
the session's tenant only, a paused badge on the page and the list, Resume; a breaker's state
and transitions; a read key sees the state but no button and cannot post the action."""

from __future__ import annotations

import uuid
from contextlib import aclosing
from datetime import timedelta

from tests.dashboard.conftest import Dash
from tests.dashboard.test_routes import submit
from tests.factories import T0
from tickwheel.domain.breaker import BreakerConfig
from tickwheel.domain.models import Scope

GREET = "/dashboard/definitions/greet"


async def test_pause_and_resume_from_the_definition_page(dash: Dash) -> None:
    http, csrf = await dash.signed_in()
    async with aclosing(http):
        page = await http.get(GREET)
        assert "Running: nothing holds it back." in page.text and f"{GREET}/pause" in page.text
        r = await http.post(f"{GREET}/pause", data={"csrf": csrf, "reason": "vendor outage"})
        assert r.status_code == 303 and "notice=Paused" in r.headers["location"]
        page = await http.get(GREET)
        assert 'id="paused-badge"' in page.text and "vendor outage" in page.text
        assert f"{GREET}/resume" in page.text
        listing = await http.get("/dashboard/definitions")
        assert '<span class="badge paused">paused</span>' in listing.text
        # Held for this tenant (the definition is shared): acme's execution waits READY.
        await submit(dash)
        assert await dash.store.execution_claim_ready("w1", 5, timedelta(seconds=30), T0) == []
        r = await http.post(f"{GREET}/resume", data={"csrf": csrf})
        assert r.status_code == 303 and "notice=Resumed" in r.headers["location"]
        assert 'id="paused-badge"' not in (await http.get(GREET)).text
        assert len(await dash.store.execution_claim_ready("w1", 5, timedelta(seconds=30), T0)) == 1
        # Without the session's CSRF token nothing happens.
        r = await http.post(f"{GREET}/pause", data={"csrf": "forged"})
        assert r.status_code == 403
        assert await dash.store.pause_list("acme") == []


async def test_a_breaker_shows_its_state_and_a_read_key_sees_no_button(dash: Dash) -> None:
    e = await submit(dash)
    config = BreakerConfig(consecutive_failures=1, cool_down=30)
    uri = "registry://jobs/greet"
    await dash.store.circuit_breaker_record(
        "acme", uri, config, uuid.UUID(e["executionId"]), True, T0
    )
    http, csrf = await dash.signed_in(await dash.key(Scope.READ))
    async with aclosing(http):
        page = await http.get(GREET)
        assert 'id="paused-badge"' in page.text and 'class="chip b-open"' in page.text
        assert "1 consecutive failed attempts" in page.text and 'id="transitions"' in page.text
        assert f"{GREET}/pause" not in page.text and f"{GREET}/resume" not in page.text
        r = await http.post(f"{GREET}/pause", data={"csrf": csrf})
        assert r.status_code == 403
        listing = await http.get("/dashboard/definitions")
        assert "breaker open" in listing.text


async def test_another_tenants_definition_has_no_flow_page(dash: Dash) -> None:
    globex = await dash.key(Scope.ADMIN, tenant="globex")
    async with dash.api(globex) as api:
        doc = {
            "name": "payroll",
            "version": 1,
            "execution": {"type": "python", "entrypoint": "tickwheel.examples.jobs:add"},
        }
        assert (await api.put("/v1/definitions", json=doc)).status_code == 201
    http, csrf = await dash.signed_in()
    async with aclosing(http):
        r = await http.post("/dashboard/definitions/payroll/pause", data={"csrf": csrf})
        assert r.status_code == 404
        assert (await http.get("/dashboard/definitions/payroll")).status_code == 404
    assert await dash.store.pause_list("globex") == []


async def test_rate_limits_show_with_their_tokens_on_the_page_and_the_list(dash: Dash) -> None:
    from tickwheel.domain.rate_limits import RateLimitSpec

    uri = "registry://jobs/greet"
    await submit(dash)
    await submit(dash)
    # (As if greet's file set it: a submission of a version without rateLimit drops it.)
    await dash.store.rate_limit_set("acme", uri, RateLimitSpec(2, 1.0), 1, T0)
    await dash.store.rate_limit_set("acme", "", RateLimitSpec(50, 60.0, 5), None, T0)
    assert len(await dash.store.execution_claim_ready("w1", 5, timedelta(seconds=30), T0)) == 2
    http, _ = await dash.signed_in(await dash.key(Scope.READ))
    async with aclosing(http):
        page = await http.get(GREET)
        assert 'id="rate-limits"' in page.text
        assert "Rate limit of greet: 2 per 1 s, burst 2" in page.text
        assert "0 tokens now</span>, 2 used" in page.text
        assert "Rate limit of the whole tenant: 50 per 60 s, burst 5" in page.text
        listing = await http.get("/dashboard/definitions")
        assert '<span class="badge paused">rate limited</span>' in listing.text
        assert 'id="tenant-rate"' in listing.text and "3 tokens now" in listing.text
        assert 'id="tenant-weight"' not in listing.text
        await dash.store.tenant_weight_set("acme", 4)
        listing = await http.get("/dashboard/definitions")
        assert "weight in the fair claim: 4 executions per turn" in listing.text
