"""Every public SDK method returns the API's resource models (``tickwheel.resources``), over
HTTP and in process alike, and the blocking ``Client`` (whose methods are made from
``AsyncClient``'s) returns the same types with the same signatures. The cron and workflow
halves are checked the same way in ``tests/cron/test_sdk.py`` and
``tests/workflows/test_sdk.py``."""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.factories import T0, definition_doc
from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.client.blocking import Facade
from tickwheel.client.client import AsyncClient
from tickwheel.client.cron import CronClient
from tickwheel.client.cron_sync import CronSync
from tickwheel.client.models import AttemptInfo, Definition, ExecutionInfo, ExecutionPage
from tickwheel.client.sync import Client
from tickwheel.client.transports.http import HttpTransport
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.client.webhooks import WebhooksClient, WebhooksSync
from tickwheel.client.workflows import WorkflowsClient, WorkflowsSync
from tickwheel.config import Settings
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.models import Scope
from tickwheel.resources.executions import HistoryEvent
from tickwheel.store.protocol import Store

BASE = "http://testserver"


@pytest.fixture(params=["http", "inprocess"])
async def client(request: pytest.FixtureRequest, store: Store) -> AsyncIterator[AsyncClient]:
    clock = FakeClock(T0)
    if request.param == "http":
        settings = Settings(_env_file=None)  # type: ignore[call-arg]
        app = httpx.ASGITransport(app=create_app(store, settings, clock))
        _, key = await create_key(store, "acme", Scope.ADMIN, "sdk", clock.now())
        http = httpx.AsyncClient(transport=app, base_url=BASE)
        transport = HttpTransport(BASE, key, http=http, backoff=0)
        async with AsyncClient(transport=transport, clock=clock) as c:
            yield c
        return
    async with AsyncClient(transport=InProcessTransport(store, "acme", clock), clock=clock) as c:
        yield c


async def test_definitions_and_executions_come_back_as_models(client: AsyncClient) -> None:
    applied = await client.apply_definition(json.dumps(definition_doc()), "json")
    assert applied.created and isinstance(applied.definition, Definition)
    assert applied.definition.uri == "registry://jobs/greet" and applied.definition.owner == "acme"
    [listed] = await client.definitions()
    assert isinstance(listed, Definition) and listed == applied.definition
    [version] = await client.definition_versions("greet")
    assert isinstance(version, Definition) and version.content_hash == listed.content_hash

    submitted = await client.submit("greet", {"name": "Ada"}, priority=3)
    assert isinstance(submitted, ExecutionInfo) and submitted.priority == 3
    page = await client.list()
    assert isinstance(page, ExecutionPage) and page.items == [submitted]
    assert await client.attempts(submitted.execution_id) == []
    cancelled = await client.cancel(submitted.execution_id)
    assert isinstance(cancelled, ExecutionInfo) and cancelled.status == "CANCELLED"
    [event] = await client.history(submitted.execution_id)
    assert isinstance(event, HistoryEvent) and event.kind == "cancelled"
    assert event.to_wire()["kind"] == "cancelled"  # the API's JSON, back from the model


def test_each_blocking_method_is_its_async_twin_with_the_same_signature() -> None:
    """The facades are made from the async clients (``client/blocking.py``): every public
    coroutine has a blocking twin, with the same parameters and return type."""
    pairs: list[tuple[type, type]] = [
        (AsyncClient, Client),
        (CronClient, CronSync),
        (WorkflowsClient, WorkflowsSync),
        (WebhooksClient, WebhooksSync),
    ]
    for async_cls, sync_cls in pairs:
        assert issubclass(sync_cls, Facade)
        coroutines = {
            name
            for name, member in vars(async_cls).items()
            if inspect.iscoroutinefunction(member) and not name.startswith("_")
        }
        coroutines -= {"close"}  # the sync Client closes its loop too: its own
        for name in sorted(coroutines):
            mine, theirs = getattr(sync_cls, name), getattr(async_cls, name)
            assert not inspect.iscoroutinefunction(mine), f"{sync_cls.__name__}.{name}"
            want = inspect.signature(theirs)
            got = inspect.signature(mine)
            assert list(got.parameters)[1:] == list(want.parameters)[1:], name
            assert got.return_annotation == want.return_annotation, name


def test_the_blocking_client_returns_the_same_models(store: Store) -> None:
    """``Client`` over an in-process transport: its loop thread runs the async twin."""

    async def make() -> AsyncClient:
        return AsyncClient(transport=InProcessTransport(store, "acme", FakeClock(T0)))

    with Client(make_async=make) as client:
        applied = client.apply_definition(json.dumps(definition_doc()), "json")
        assert isinstance(applied.definition, Definition)
        assert [d.name for d in client.definitions()] == ["greet"]
        submitted = client.submit("greet", {"name": "Ada"})
        assert isinstance(client.get(submitted.execution_id), ExecutionInfo)
        assert all(isinstance(a, AttemptInfo) for a in client.attempts(submitted.execution_id))
        client.cancel(submitted.execution_id)
        assert [e.kind for e in client.history(submitted.execution_id)] == ["cancelled"]
