"""A database that cannot be reached is a 503 with ``Retry-After`` and the JSON error body, on
both backends, never a 500. (The real outage, a PostgreSQL stopped and restarted under a running
server, is ``tests/acceptance/test_database_outage.py``.)"""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.api.conftest import Api
from tests.factories import definition_doc
from tickwheel.client.transports.http import HttpTransport
from tickwheel.domain.errors import Unavailable
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.sqlite.store import SqliteStore


async def make_unreachable(api: Api) -> sqlite3.Connection | None:
    """PostgreSQL: its pool closed under the app. SQLite: another process holds the write lock
    past the busy timeout (writes only: in WAL mode reads still work)."""
    if isinstance(api.store, PostgresStore):
        await api.store.pool.close()
        return None
    assert isinstance(api.store, SqliteStore)
    await api.store._conn.execute("PRAGMA busy_timeout = 50")  # not 10 s in a test
    other = sqlite3.connect(api.store.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    return other


async def test_an_unreachable_database_is_a_503_with_retry_after(api: Api) -> None:
    other = await make_unreachable(api)
    try:
        r = await api.http.put("/v1/definitions", json=definition_doc(name="later"))
        assert r.status_code == 503, r.text
        assert int(r.headers["Retry-After"]) >= 1
        error = r.json()["error"]
        assert error["code"] == "unavailable"
        assert "retry" in error["message"]
        if other is None:  # PostgreSQL: reads and the readiness probe fail too
            listed = await api.http.get("/v1/executions")
            assert listed.status_code == 503, listed.text
            assert "Retry-After" in listed.headers
            ready = await api.http.get("/readyz")
            assert ready.status_code == 503, ready.text
    finally:
        if other is not None:
            other.close()


async def test_the_sdk_waits_as_long_as_retry_after_says_then_raises_unavailable(api: Api) -> None:
    """The SDK's HTTP transport retries a 503 no sooner than the server's ``Retry-After`` and, if
    the database stays away, raises ``Unavailable`` (a ConnectionError), not a generic error."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    transport = HttpTransport("http://testserver", api.admin_key, http=api.http, sleep=sleep)
    other = await make_unreachable(api)
    try:
        with pytest.raises(Unavailable, match="retry"):
            await transport.definition_apply(
                json.dumps(definition_doc(name="later")).encode(), "json"
            )
    finally:
        if other is not None:
            other.close()
    assert len(waits) == 3 and all(w >= 1 for w in waits), waits
