"""The API server's cache of API keys (``api/auth.py``), on both backends: a key found is read
from the store once per second at most, a revoked one is refused once that second has passed,
and unknown keys are never kept (each is looked up, and refused, every time)."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api
from tests.factories import T0
from tickwheel.api.auth import KeyCache, create_key
from tickwheel.api.deps import AppState
from tickwheel.domain.models import Scope
from tickwheel.store.protocol import Store

BODY = {"definitionUri": "registry://jobs/nothing-here"}


class Ticks:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def counting(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    original = store.api_key_by_hash

    async def by_hash(key_hash: str):  # type: ignore[no-untyped-def]
        reads.append(key_hash)
        return await original(key_hash)

    monkeypatch.setattr(store, "api_key_by_hash", by_hash)
    return reads


async def test_a_key_is_read_once_a_second_and_a_revoked_one_refused_after_it(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticks = Ticks()
    state: AppState = api.http._transport.app.state.tickwheel  # type: ignore[attr-defined]
    state.keys = KeyCache(monotonic=ticks)
    key, secret = await create_key(api.store, "acme", Scope.READ, "cached", T0)
    headers = {"Authorization": f"Bearer {secret}"}
    reads = counting(api.store, monkeypatch)
    for _ in range(3):
        assert (await api.http.get("/v1/executions", headers=headers)).status_code == 200
    assert len(reads) == 1
    assert await api.store.api_key_revoke(key.key_id, T0)
    ticks.now = 0.5  # within the second: still the key found before
    assert (await api.http.get("/v1/executions", headers=headers)).status_code == 200
    ticks.now = 1.0
    refused = await api.http.get("/v1/executions", headers=headers)
    assert refused.status_code == 401 and "unknown or revoked" in refused.text
    assert len(reads) == 2


async def test_unknown_keys_are_looked_up_and_refused_every_time(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = counting(api.store, monkeypatch)
    headers = {"Authorization": "Bearer tw_000000000000_not-a-key"}
    for _ in range(3):
        r = await api.http.post("/v1/executions", json=BODY, headers=headers)
        assert r.status_code == 401 and "unknown or revoked" in r.text
    assert len(reads) == 3
    # Scope is the key's, cached or not: a read key may not submit.
    _, secret = await create_key(api.store, "acme", Scope.READ, "reader", T0)
    reader = {"Authorization": f"Bearer {secret}"}
    for _ in range(2):
        assert (await api.http.post("/v1/executions", json=BODY, headers=reader)).status_code == 403
