"""The dashboard's session table on both backends: a session is found while it is live and its
key is not revoked, and is gone once deleted or expired."""

from __future__ import annotations

from datetime import timedelta

from tests.factories import T0
from tickwheel.api.auth import create_key
from tickwheel.domain.models import Scope
from tickwheel.store.factory import session_store_for
from tickwheel.store.protocol import Store

LATER = T0 + timedelta(hours=12)


async def test_a_session_lives_until_deleted_expired_or_its_key_revoked(store: Store) -> None:
    sessions = session_store_for(store)
    key, _ = await create_key(store, "acme", Scope.SUBMIT, "k", T0)
    await sessions.dashboard_session_insert("a" * 64, key.key_id, T0, LATER)
    await sessions.dashboard_session_insert("b" * 64, key.key_id, T0, LATER)
    await sessions.dashboard_session_insert("c" * 64, None, T0, T0 + timedelta(hours=1))

    found = await sessions.dashboard_session_get("a" * 64, T0)
    assert found is not None and found.key is not None
    assert (found.key.key_id, found.key.tenant, found.key.scope) == (key.key_id, "acme", "submit")
    assert found.expires_at == LATER
    keyless = await sessions.dashboard_session_get("c" * 64, T0)
    assert keyless is not None and keyless.key is None
    assert await sessions.dashboard_session_get("d" * 64, T0) is None

    assert await sessions.dashboard_session_delete("a" * 64)
    assert not await sessions.dashboard_session_delete("a" * 64)
    assert await sessions.dashboard_session_get("a" * 64, T0) is None
    assert await sessions.dashboard_session_get("b" * 64, T0) is not None

    assert await sessions.dashboard_session_get("b" * 64, LATER) is None  # expired at LATER
    assert await store.api_key_revoke(key.key_id, T0)
    assert await sessions.dashboard_session_get("b" * 64, T0) is None

    assert await sessions.dashboard_session_prune(T0 + timedelta(hours=1)) == 1  # "c"
    assert await sessions.dashboard_session_get("c" * 64, T0) is None
    assert await sessions.dashboard_session_prune(LATER) == 1  # "b"
