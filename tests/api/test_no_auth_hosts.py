"""``--insecure-no-auth`` answers only requests addressed to a loopback name, so a DNS-rebinding
page (its own name pointed at 127.0.0.1) cannot drive the admin API through a browser."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.factories import T0, definition_doc
from tickwheel.api.app import create_app
from tickwheel.api.hosts import loopback_host
from tickwheel.config import Settings
from tickwheel.domain.clock import FakeClock
from tickwheel.store.protocol import Store


@pytest.fixture
async def no_auth(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(insecure_no_auth=True, _env_file=None)  # type: ignore[call-arg]
    app = create_app(store, settings, FakeClock(T0))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
        yield http


@pytest.mark.parametrize(
    "host", ["127.0.0.1:8000", "localhost:8000", "LOCALHOST", "[::1]:8000", "127.0.0.2"]
)
async def test_loopback_names_are_served(no_auth: httpx.AsyncClient, host: str) -> None:
    r = await no_auth.put("/v1/definitions", json=definition_doc(), headers={"Host": host})
    assert r.status_code in (200, 201), r.text


@pytest.mark.parametrize(
    "host",
    [
        "rebind.attacker.example:8000",  # resolves to 127.0.0.1 by the attacker's DNS
        "127.0.0.1.attacker.example",
        "localhost.attacker.example",
        "10.0.0.5:8000",
        "[::1].attacker.example",
        "localhost:80x",
        "",
    ],
)
async def test_any_other_host_is_refused_and_nothing_changes(
    no_auth: httpx.AsyncClient, host: str, store: Store
) -> None:
    r = await no_auth.put("/v1/definitions", json=definition_doc(), headers={"Host": host})
    assert r.status_code == 421, r.text
    error = r.json()["error"]
    assert error["code"] == "misdirected_request"
    assert "--insecure-no-auth" in error["message"]
    assert await store.definition_list("default") == []
    for path in ("/v1/executions", "/", "/metrics"):
        assert (await no_auth.get(path, headers={"Host": host})).status_code == 421


async def test_with_keys_required_the_host_is_not_checked(store: Store) -> None:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    app = create_app(store, settings, FakeClock(T0))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.example.com") as http:
        assert (await http.get("/v1/executions")).status_code == 401
        assert (await http.get("/healthz")).status_code == 200


def test_loopback_host_parsing() -> None:
    assert loopback_host("[::1]")
    assert not loopback_host("[::1")
    assert not loopback_host("::1")  # an IPv6 literal in Host must be bracketed
    assert not loopback_host("[::1]x")
