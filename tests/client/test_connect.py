"""``tickwheel.connect``: the SDK on the database, without an API server, obeying the API's rules
(validation, idempotency, tenant), and closing the store it opened. Both backends."""

from __future__ import annotations

import asyncio

import pytest

import tickwheel
from tests.client.conftest import GREET_JSON, Database
from tickwheel.domain.errors import Conflict, InvalidInput, NotFound


async def test_the_async_client_registers_submits_and_reads(database: Database) -> None:
    async with await tickwheel.connect_async(database.url, tenant="acme") as client:
        applied = await client.apply_definition(GREET_JSON, "json")
        assert applied.created
        info = await client.submit("greet", {"name": "Ada"}, idempotency_key="k1")
        assert info.status == "READY"
        assert (await client.get(info.execution_id)).execution_id == info.execution_id
        again = await client.submit("greet", {"name": "Ada"}, idempotency_key="k1")
        assert again.execution_id == info.execution_id
        with pytest.raises(Conflict):
            await client.submit("greet", {"name": "Bob"}, idempotency_key="k1")
        with pytest.raises(InvalidInput, match="inputs do not match"):
            await client.submit("greet", {"name": "Ada", "times": "twice"})
        with pytest.raises(InvalidInput, match="no definition"):
            await client.submit("nope", {})
        assert len((await client.list()).items) == 1
    # Another tenant sees none of it.
    async with await tickwheel.connect_async(database.url, tenant="other") as other:
        with pytest.raises(NotFound):
            await other.get(info.execution_id)


def test_the_blocking_client_works_the_same_and_closes_its_store(database: Database) -> None:
    with tickwheel.connect(database.url, tenant="acme") as client:
        client.apply_definition(GREET_JSON, "json")
        info = client.submit_after(60, "greet", {"name": "Ada"})
        assert info.status == "SCHEDULED"
        assert client.get(info.execution_id).execute_at == info.execute_at
        store = client._async.transport.store  # type: ignore[attr-defined]
    # Closed with the client: each backend says "closed" its own way.
    with pytest.raises(Exception):  # noqa: B017
        asyncio.run(store.ping())


def test_a_url_of_no_known_database_is_refused() -> None:
    with pytest.raises(ValueError, match="unsupported database URL"):
        tickwheel.connect("mysql://localhost/db")


def test_the_http_client_cannot_submit_on_a_connection() -> None:
    with (
        tickwheel.Client("http://127.0.0.1:9") as client,
        pytest.raises(TypeError, match=r"tickwheel\.connect"),
    ):
        client.submit("greet", {"name": "Ada"}, connection=object())
