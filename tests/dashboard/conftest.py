"""Dashboard tests: route tests over httpx's ASGI transport (both backends), and browser tests
that drive Debian's Chromium against a real ``tickwheel server`` subprocess."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from tests.factories import T0, definition_doc
from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.config import Settings
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.models import Scope
from tickwheel.store.protocol import Store

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass
class Dash:
    app: object
    store: Store
    clock: FakeClock
    admin: str

    def client(self) -> httpx.AsyncClient:
        """A browser-like client: cookies kept, redirects not followed (tests look at them)."""
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app),  # type: ignore[arg-type]
            base_url="http://testserver",
        )

    async def key(self, scope: Scope, tenant: str = "acme") -> str:
        _, secret = await create_key(self.store, tenant, scope, "test", self.clock.now())
        return secret

    async def signed_in(self, key: str | None = None) -> tuple[httpx.AsyncClient, str]:
        """A client with a session for ``key`` (default: the admin key) and its CSRF token."""
        http = self.client()
        page = await http.get("/dashboard/signin")
        token = CSRF.search(page.text)
        assert token, page.text
        r = await http.post(
            "/dashboard/signin",
            data={"csrf": token.group(1), "api_key": key or self.admin, "next": "/"},
        )
        assert r.status_code == 303, r.text
        overview = await http.get("/")
        assert overview.status_code == 200, overview.text
        found = CSRF.search(overview.text)
        assert found
        return http, found.group(1)

    def api(self, key: str | None = None) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app),  # type: ignore[arg-type]
            base_url="http://testserver",
            headers={"Authorization": f"Bearer {key or self.admin}"},
        )


@pytest.fixture
async def dash(store: Store) -> AsyncIterator[Dash]:
    clock = FakeClock(T0)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    app = create_app(store, settings, clock)
    _, admin = await create_key(store, "acme", Scope.ADMIN, "admin", T0)
    d = Dash(app, store, clock, admin)
    # Shared, so that every tenant of these tests can submit it: the operator publishes it.
    _, operator = await create_key(store, "default", Scope.OPERATOR, "operator", T0)
    async with d.api(operator) as http:
        r = await http.put("/v1/definitions?shared=true", json=definition_doc())
        assert r.status_code == 201, r.text
    yield d
