"""The dashboard's routes: sign-in is required, CSRF is checked, everything is tenant-scoped,
and the actions obey the API's rules (scope, state machine)."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from datetime import timedelta
from typing import Any

from pydantic.alias_generators import to_camel

from tests.dashboard.conftest import Dash
from tests.factories import T0
from tickwheel.dashboard.executions import SHOWN_APART
from tickwheel.dashboard.live import Hub
from tickwheel.domain.models import Scope
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.resources.executions import Execution
from tickwheel.store.factory import stats_store_for
from tickwheel.store.protocol import AttemptResult

BODY = {"definitionUri": "registry://jobs/greet", "inputs": {"name": "Ada"}}


async def submit(dash: Dash, key: str | None = None, idem: str | None = None) -> dict[str, Any]:
    async with dash.api(key) as http:
        headers = {"Idempotency-Key": idem} if idem else {}
        r = await http.post("/v1/executions", json=BODY, headers=headers)
        assert r.status_code == 201, r.text
        body: dict[str, Any] = r.json()
        return body


async def fail_one(dash: Dash) -> str:
    """A dead letter: submitted, claimed, failed permanently."""
    e = await submit(dash)
    [claimed] = await dash.store.execution_claim_ready("w1", 1, timedelta(seconds=30), T0)
    assert claimed.fencing_token is not None
    await dash.store.attempt_finish(
        AttemptResult(
            claimed.execution_id,
            claimed.fencing_token,
            AttemptStatus.FAILED,
            ExecutionStatus.FAILED,
            error={"kind": "permanent", "message": "bad input file"},
        ),
        T0,
    )
    return str(e["executionId"])


async def test_pages_need_a_session(dash: Dash) -> None:
    async with dash.client() as http:
        for path in (
            "/",
            "/dashboard/executions",
            "/dashboard/dead-letters",
            "/dashboard/cron-jobs",
        ):
            r = await http.get(path)
            assert r.status_code == 303, path
            assert r.headers["location"].startswith("/dashboard/signin?next=")
        assert (await http.get("/dashboard/events")).status_code == 401
        assert (await http.get("/dashboard/api/overview")).status_code == 401
        # A forged cookie is no session.
        http.cookies.set("tw_session", "eyJoIjoiIn0.forged")
        assert (await http.get("/")).status_code == 303


async def test_sign_in_sets_a_strict_httponly_cookie_and_sign_out_ends_it(dash: Dash) -> None:
    async with dash.client() as http:
        page = await http.get("/dashboard/signin?next=/dashboard/executions")
        token = page.text.split('name="csrf" value="')[1].split('"')[0]
        r = await http.post(
            "/dashboard/signin",
            data={"csrf": token, "api_key": dash.admin, "next": "/dashboard/executions"},
        )
        assert r.status_code == 303 and r.headers["location"] == "/dashboard/executions"
        cookie = next(
            h for h in r.headers.get_list("set-cookie") if h.startswith("tw_session=")
        ).lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        overview = await http.get("/")
        assert overview.status_code == 200
        assert "content-security-policy" in overview.headers
        csrf = overview.text.split('name="csrf" value="')[1].split('"')[0]
        assert (await http.post("/dashboard/signout", data={"csrf": csrf})).status_code == 303
        assert (await http.get("/")).status_code == 303


async def test_sign_in_refuses_a_bad_key_a_missing_token_and_foreign_redirects(dash: Dash) -> None:
    async with dash.client() as http:
        page = await http.get("/dashboard/signin")
        token = page.text.split('name="csrf" value="')[1].split('"')[0]
        bad = await http.post("/dashboard/signin", data={"csrf": token, "api_key": "tw_nope"})
        assert bad.status_code == 200 and "unknown or revoked" in bad.text
        no_token = await http.post("/dashboard/signin", data={"api_key": dash.admin})
        assert no_token.status_code == 403
        evil = await http.post(
            "/dashboard/signin",
            data={"csrf": token, "api_key": dash.admin, "next": "//evil.example/x"},
        )
        assert evil.headers["location"] == "/"


async def test_actions_need_the_csrf_token(dash: Dash) -> None:
    e = await submit(dash)
    http, csrf = await dash.signed_in()
    async with aclosing(http):
        path = f"/dashboard/executions/{e['executionId']}/cancel"
        assert (await http.post(path)).status_code == 403
        assert (await http.post(path, data={"csrf": "wrong"})).status_code == 403
        page = await http.get(f"/dashboard/executions/{e['executionId']}")
        assert "READY" in page.text and "/cancel" in page.text
        r = await http.post(path, data={"csrf": csrf})
        assert r.status_code == 303 and "notice=Cancelled" in r.headers["location"]
        page = await http.get(f"/dashboard/executions/{e['executionId']}")
        assert "CANCELLED" in page.text and "/cancel" not in page.text


async def test_pages_and_actions_are_scoped_to_the_keys_tenant(dash: Dash) -> None:
    other_key = await dash.key(Scope.ADMIN, tenant="globex")
    theirs = await submit(dash, other_key)
    ours = await submit(dash)
    http, csrf = await dash.signed_in()
    async with aclosing(http):
        listing = await http.get("/dashboard/executions")
        assert ours["executionId"] in listing.text
        assert theirs["executionId"] not in listing.text
        assert (await http.get(f"/dashboard/executions/{theirs['executionId']}")).status_code == 404
        r = await http.post(
            f"/dashboard/executions/{theirs['executionId']}/cancel", data={"csrf": csrf}
        )
        assert r.status_code == 404
        data = (await http.get("/dashboard/api/overview")).json()
        assert data["counts"]["READY"] == 1


async def test_a_read_key_sees_but_cannot_act(dash: Dash) -> None:
    e = await submit(dash)
    http, csrf = await dash.signed_in(await dash.key(Scope.READ))
    async with aclosing(http):
        page = await http.get(f"/dashboard/executions/{e['executionId']}")
        assert page.status_code == 200 and "/cancel" not in page.text
        r = await http.post(f"/dashboard/executions/{e['executionId']}/cancel", data={"csrf": csrf})
        assert r.status_code == 403


async def test_a_revoked_key_ends_its_sessions(dash: Dash) -> None:
    key = await dash.key(Scope.SUBMIT)
    http, _ = await dash.signed_in(key)
    async with aclosing(http):
        [stored] = [k for k in await dash.store.api_key_list("acme") if k.scope is Scope.SUBMIT]
        await dash.store.api_key_revoke(stored.key_id, T0)
        assert (await http.get("/")).status_code == 303


async def test_dead_letters_group_and_replay_a_selection(dash: Dash) -> None:
    first = await fail_one(dash)
    http, csrf = await dash.signed_in()
    async with aclosing(http):
        page = await http.get("/dashboard/dead-letters")
        assert "bad input file" in page.text and first in page.text
        r = await http.post("/dashboard/dead-letters/replay", data={"csrf": csrf, "id": [first]})
        assert r.status_code == 303 and "Replayed%201%20of%201" in r.headers["location"]
        detail = await http.get(f"/dashboard/executions/{first}")
        assert "READY" in detail.text and "replayed" in detail.text
        assert "No dead letters" in (await http.get("/dashboard/dead-letters")).text


async def test_execution_page_shows_attempts_and_filters_work(dash: Dash) -> None:
    eid = await fail_one(dash)
    await submit(dash, idem="order-42")
    http, _ = await dash.signed_in()
    async with aclosing(http):
        page = await http.get(f"/dashboard/executions/{eid}")
        assert "Attempt 1" in page.text and "w1" in page.text and "fencing token" in page.text
        failed = await http.get("/dashboard/executions", params={"status": "FAILED"})
        assert eid in failed.text
        keyed = await http.get("/dashboard/executions", params={"key": "order-42"})
        assert "order-42" in keyed.text and eid not in keyed.text
        assert (await http.get("/dashboard/executions", params={"from": "nope"})).status_code == 400
        assert (await http.get("/dashboard/executions/not-a-uuid")).status_code == 404


async def test_definitions_and_cron_jobs(dash: Dash) -> None:
    async with dash.api() as api:
        job = {
            "name": "nightly",
            "definitionUri": "registry://jobs/greet",
            "expression": "0 2 * * *",
            "timezone": "Europe/Berlin",
            "inputs": {"name": "A"},
        }
        assert (await api.post("/v1/cron-jobs", json=job)).status_code == 201
    http, csrf = await dash.signed_in()
    async with aclosing(http):
        assert "greet" in (await http.get("/dashboard/definitions")).text
        assert "v1" in (await http.get("/dashboard/definitions/greet")).text
        page = await http.get("/dashboard/cron-jobs")
        assert "nightly" in page.text and "Europe/Berlin" in page.text and "Pause" in page.text
        r = await http.post("/dashboard/cron-jobs/nightly/pause", data={"csrf": csrf})
        assert r.status_code == 303 and "PAUSED" in r.headers["location"]
        assert "Resume" in (await http.get("/dashboard/cron-jobs")).text
        preview = await http.get(
            "/dashboard/api/cron-preview", params={"expression": "*/5 * * * *"}
        )
        assert preview.status_code == 200 and len(preview.json()["items"]) == 5
        bad = await http.get("/dashboard/api/cron-preview", params={"expression": "nope"})
        assert bad.status_code == 422 and bad.json()["error"]["message"]


async def test_stats_queries_on_each_backend(dash: Dash) -> None:
    await fail_one(dash)
    await submit(dash)
    stats = stats_store_for(dash.store)
    counts = {c.status: c.count for c in await stats.stats_status_counts("acme")}
    assert counts == {"FAILED": 1, "READY": 1}
    since = T0 - timedelta(hours=1)
    minutes = await stats.stats_starts_per_minute("acme", since)
    assert sum(m.count for m in minutes) == 1
    [sample] = await stats.stats_start_sample("acme", since, 10)
    assert sample.started_at >= sample.execute_at
    assert await stats.stats_status_counts("globex") == []


async def test_one_feed_query_per_tick_whatever_the_number_of_clients(dash: Dash) -> None:
    await submit(dash)
    hub = Hub(stats_store_for(dash.store), dash.clock)
    feed = hub.feed("acme")
    boxes = [feed.subscribe() for _ in range(50)]
    snaps = await asyncio.gather(*(b.get(timeout=5.0) for b in boxes))
    assert all(s is not None and s["counts"]["READY"] == 1 for s in snaps)
    assert feed.queries == 1
    for box in boxes:
        feed.unsubscribe(box)
    assert feed.task is not None
    await asyncio.wait_for(feed.task, 5.0)


async def test_the_execution_page_lists_every_field_it_does_not_lay_out(dash: Dash) -> None:
    """A field of an Execution the page has no place for (``priority``, or a new one) is among
    its facts under its API name, and every name the page lays out is one of the model's."""
    e = await submit(dash)
    http, _ = await dash.signed_in(await dash.key(Scope.READ))
    async with aclosing(http):
        page = (await http.get(f"/dashboard/executions/{e['executionId']}")).text
    facts = [k for k in e if k not in SHOWN_APART]
    assert facts == ["priority"]
    assert '<dt>priority</dt><dd class="mono">0</dd>' in page
    wire_names = {f.alias or f.serialization_alias for f in Execution.model_fields.values()}
    assert {to_camel(n) for n in Execution.model_fields} | wire_names >= SHOWN_APART
