"""The API under test over real HTTP semantics (httpx's ASGI transport), on both backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from tests.factories import T0
from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.config import Settings
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.models import Scope
from tickwheel.store.protocol import Store


@dataclass
class Api:
    http: httpx.AsyncClient
    store: Store
    clock: FakeClock
    admin_key: str

    async def key(self, scope: Scope, tenant: str = "acme") -> dict[str, str]:
        _, secret = await create_key(self.store, tenant, scope, "test", self.clock.now())
        return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
async def api(store: Store) -> AsyncIterator[Api]:
    clock = FakeClock(T0)
    settings = Settings(max_body_bytes=64 * 1024, _env_file=None)  # type: ignore[call-arg]
    app = create_app(store, settings, clock)
    _, admin = await create_key(store, "acme", Scope.ADMIN, "admin", T0)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport,
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {admin}"},
    ) as http:
        yield Api(http, store, clock, admin)
