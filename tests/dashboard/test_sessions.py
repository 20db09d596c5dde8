"""Dashboard sessions live in the database: signing out ends that session for good (its old
cookie included, on every API process), other sessions go on, a revoked key ends its sessions,
and a session expires after 12 h by the injected clock. Failed sign-ins are throttled per client
address. Both backends, over HTTP."""

from __future__ import annotations

from contextlib import aclosing

import httpx

from tests.dashboard.conftest import CSRF, Dash
from tests.factories import T0
from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.config import Settings
from tickwheel.domain.models import Scope
from tickwheel.store.factory import session_store_for

COOKIE = "tw_session"


def with_cookie(dash: Dash, value: str, app: object | None = None) -> httpx.AsyncClient:
    """A fresh client (another browser, or the same cookie replayed) holding one cookie."""
    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app or dash.app),  # type: ignore[arg-type]
        base_url="http://testserver",
    )
    http.cookies.set(COOKIE, value)
    return http


async def signed_in(http: httpx.AsyncClient) -> bool:
    r = await http.get("/dashboard/api/overview")
    assert r.status_code in (200, 401), r.text
    return r.status_code == 200


async def sign_out(http: httpx.AsyncClient, csrf: str) -> None:
    r = await http.post("/dashboard/signout", data={"csrf": csrf})
    assert r.status_code == 303, r.text


async def test_sign_out_ends_the_session_and_its_old_cookie_for_good(dash: Dash) -> None:
    http, csrf = await dash.signed_in()
    async with aclosing(http):
        old = http.cookies[COOKIE]
        await sign_out(http, csrf)
    # A copy of the cookie taken before sign-out (another tab, a stolen value) is dead too.
    async with with_cookie(dash, old) as replay:
        assert not await signed_in(replay)
        r = await replay.get("/")
        assert r.status_code == 303 and r.headers["location"].startswith("/dashboard/signin")


async def test_signing_out_of_one_session_leaves_the_others(dash: Dash) -> None:
    first, first_csrf = await dash.signed_in()
    second, _ = await dash.signed_in()  # the same key, another browser
    async with aclosing(first), aclosing(second):
        await sign_out(first, first_csrf)
        assert not await signed_in(first)
        assert await signed_in(second)


async def test_revoking_the_key_ends_its_sessions_and_only_those(dash: Dash) -> None:
    key, secret = await create_key(dash.store, "acme", Scope.READ, "to revoke", T0)
    doomed, _ = await dash.signed_in(secret)
    other, _ = await dash.signed_in()
    async with aclosing(doomed), aclosing(other):
        assert await signed_in(doomed)
        assert await dash.store.api_key_revoke(key.key_id, T0)
        assert not await signed_in(doomed)
        assert await signed_in(other)


async def test_a_session_holds_on_another_api_process_and_so_does_sign_out(dash: Dash) -> None:
    """Two apps over one database with one dashboard secret, as two API processes behind one
    address: nothing about a session lives in one process's memory."""
    settings = Settings(dashboard_secret="shared", _env_file=None)  # type: ignore[call-arg]
    one = create_app(dash.store, settings, dash.clock)
    two = create_app(dash.store, settings, dash.clock)
    dash_one = Dash(one, dash.store, dash.clock, dash.admin)
    http, csrf = await dash_one.signed_in()
    async with aclosing(http), with_cookie(dash, http.cookies[COOKIE], two) as elsewhere:
        assert await signed_in(elsewhere)
        await sign_out(http, csrf)
        assert not await signed_in(elsewhere)


async def test_a_session_ends_after_twelve_hours_by_the_clock(dash: Dash) -> None:
    http, _ = await dash.signed_in()
    async with aclosing(http):
        dash.clock.advance(hours=11, minutes=59)
        assert await signed_in(http)
        dash.clock.advance(minutes=1)
        assert not await signed_in(http)
    # Sign-in clears expired rows: the store keeps no dead sessions for ever.
    fresh, _ = await dash.signed_in()
    await fresh.aclose()
    assert await session_store_for(dash.store).dashboard_session_prune(dash.clock.now()) == 0


async def test_a_keyless_session_is_nothing_once_keys_are_required(dash: Dash) -> None:
    """Made under --insecure-no-auth, replayed after a restart with keys required."""
    secret = "same-secret"
    keyless = create_app(
        dash.store,
        Settings(insecure_no_auth=True, dashboard_secret=secret, _env_file=None),  # type: ignore[call-arg]
        dash.clock,
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=keyless), base_url="http://127.0.0.1:8000"
    ) as http:
        page = await http.get("/dashboard/signin")
        token = CSRF.search(page.text)
        assert token
        r = await http.post("/dashboard/signin", data={"csrf": token.group(1), "api_key": ""})
        assert r.status_code == 303, r.text
        assert await signed_in(http)
        cookie = http.cookies[COOKIE]
    keyed = create_app(
        dash.store,
        Settings(dashboard_secret=secret, _env_file=None),  # type: ignore[call-arg]
        dash.clock,
    )
    async with with_cookie(dash, cookie, keyed) as replay:
        assert not await signed_in(replay)


# -- throttling failed sign-ins -------------------------------------------------------------------


def browser(dash: Dash, address: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=dash.app, client=(address, 50000)),  # type: ignore[arg-type]
        base_url="http://testserver",
    )


async def attempt(http: httpx.AsyncClient, key: str) -> httpx.Response:
    page = await http.get("/dashboard/signin")
    token = CSRF.search(page.text)
    assert token, page.text
    return await http.post("/dashboard/signin", data={"csrf": token.group(1), "api_key": key})


async def test_five_failed_sign_ins_a_minute_then_429_with_retry_after(dash: Dash) -> None:
    async with browser(dash, "192.0.2.7") as guesser, browser(dash, "192.0.2.8") as bystander:
        for n in range(5):
            r = await attempt(guesser, f"tw_guess_{n}")
            assert r.status_code == 200 and "unknown or revoked" in r.text
        dash.clock.advance(20)
        refused = await attempt(guesser, dash.admin)  # even the right key, while throttled
        assert refused.status_code == 429, refused.text
        assert refused.headers["Retry-After"] == "40"
        assert "too many failed sign-ins" in refused.text
        assert COOKIE not in refused.cookies
        # Another address is not affected.
        assert (await attempt(bystander, dash.admin)).status_code == 303
        # Once the first failure is a minute old, one more try is allowed.
        dash.clock.advance(40)
        assert (await attempt(guesser, dash.admin)).status_code == 303


async def test_a_success_does_not_reset_the_failure_count(dash: Dash) -> None:
    async with browser(dash, "192.0.2.9") as guesser:
        for n in range(4):
            assert (await attempt(guesser, f"tw_guess_{n}")).status_code == 200
        assert (await attempt(guesser, dash.admin)).status_code == 303
        assert (await attempt(guesser, "tw_guess_5")).status_code == 200
        assert (await attempt(guesser, dash.admin)).status_code == 429
