"""The Python SDK as its users meet it.

- ``tickwheel.Client`` (the blocking facade) against a real ``tickwheel server`` process.
- ``AsyncClient`` over the in-process transport on both backends, with a ``FakeClock``: ``wait``.
- ``HttpTransport`` against the real API app through ``httpx.ASGITransport``, behind a transport
  that loses requests or responses on purpose: retries, idempotency keys, error mapping."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

import tickwheel
from tests.acceptance.conftest import EXAMPLES, ServerProcess
from tests.factories import T0, definition_doc
from tickwheel import (
    AsyncClient,
    BadRequest,
    Client,
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    SubmitRequest,
    Unauthorized,
)
from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.client.models import Definition
from tickwheel.client.transports.http import HttpTransport
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.config import Settings
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.models import ExecutionFilter, Scope
from tickwheel.domain.states import ExecutionStatus
from tickwheel.store.protocol import Store

TENANT = "acme"
BASE_URL = "http://tickwheel.test"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# =================================================================================================
# Client (sync) against the real server process
# =================================================================================================


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.url, server.admin_key) as c:
        yield c


def write_definition(directory: Path, name: str, **overrides: Any) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(definition_doc(name, **overrides), sort_keys=False))
    return path


def test_the_public_surface_is_importable_from_the_package() -> None:
    assert tickwheel.Client is Client and tickwheel.AsyncClient is AsyncClient
    assert issubclass(tickwheel.Conflict, tickwheel.TickwheelError)


def test_apply_definition_from_a_path(client: Client, tmp_path: Path) -> None:
    example = client.apply_definition(EXAMPLES / "hello.yaml", shared=True)
    assert example.created is False
    assert isinstance(example.definition, Definition)
    assert example.definition.uri == "registry://jobs/hello"
    assert example.definition.shared is True

    name = unique("sdk-def")
    path = write_definition(tmp_path, name)
    first = client.apply_definition(path)
    assert first.created is True
    assert first.definition.uri == f"registry://jobs/{name}"
    assert client.apply_definition(str(path)).created is False
    assert [d.version for d in client.definition_versions(name)] == [1]

    (tmp_path / "changed").mkdir()
    changed = write_definition(tmp_path / "changed", name, timeout=99)
    with pytest.raises(Conflict, match="immutable"):
        client.apply_definition(changed)
    assert client.definition_versions(name)[0].timeout == 30


def test_submit_submit_after_and_get(client: Client) -> None:
    key = unique("sdk")
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=30)
    e = client.submit("hello", {"name": "Ada"}, at, key)
    assert e.status is ExecutionStatus.SCHEDULED
    assert e.definition_uri == "registry://jobs/hello" and e.definition_version == 1
    assert e.inputs == {"name": "Ada", "times": 1}
    assert e.execute_at == at and e.idempotency_key == key
    assert not e.finished
    assert client.get(e.execution_id) == e
    assert client.get(str(e.execution_id)) == e
    assert client.submit("hello", {"name": "Ada"}, at, key) == e  # same key, same request

    before = datetime.now(UTC)
    later = client.submit_after(timedelta(minutes=5), "registry://jobs/hello", {"name": "Bob"})
    after = datetime.now(UTC)
    assert later.status is ExecutionStatus.SCHEDULED
    assert before + timedelta(minutes=5) <= later.execute_at <= after + timedelta(minutes=5)
    assert later.idempotency_key and later.idempotency_key.startswith("sdk-")

    now = client.submit("hello", {"name": "Cy"})
    assert now.status is ExecutionStatus.READY


def test_list_pages_with_a_cursor(client: Client, tmp_path: Path) -> None:
    name = unique("sdk-page")
    client.apply_definition(write_definition(tmp_path, name))
    ids = [
        client.submit_after(timedelta(hours=1), name, {"name": f"n{i}"}).execution_id
        for i in range(5)
    ]
    seen: list[uuid.UUID] = []
    cursor: str | None = None
    sizes = []
    while True:
        page = client.list(definition=name, limit=2, cursor=cursor)
        sizes.append(len(page.items))
        seen += [e.execution_id for e in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sizes == [2, 2, 1]
    assert seen == list(reversed(ids)), "newest first, each exactly once"
    only = client.list(definition=name, status=["SCHEDULED"], limit=500)
    assert {e.execution_id for e in only.items} == set(ids) and only.next_cursor is None
    assert client.list(definition=name, status=[ExecutionStatus.CANCELLED]).items == []


def test_cancel_then_cancel_again_is_a_conflict(client: Client) -> None:
    e = client.submit_after(timedelta(minutes=10), "hello", {"name": "Ada"})
    cancelled = client.cancel(e.execution_id)
    assert cancelled.status is ExecutionStatus.CANCELLED and cancelled.finished
    with pytest.raises(Conflict, match="CANCELLED") as info:
        client.cancel(e.execution_id)
    assert info.value.details == {"status": "CANCELLED"}
    assert client.get(e.execution_id).status is ExecutionStatus.CANCELLED
    assert client.wait(e.execution_id, timeout=5).status is ExecutionStatus.CANCELLED


def test_replay_of_an_execution_that_did_not_fail_is_a_conflict(client: Client) -> None:
    e = client.submit_after(timedelta(minutes=10), "hello", {"name": "Ada"})
    with pytest.raises(Conflict, match="only a FAILED execution"):
        client.replay(e.execution_id)
    assert client.get(e.execution_id).status is ExecutionStatus.SCHEDULED


def test_get_of_an_unknown_id_is_not_found(client: Client) -> None:
    with pytest.raises(NotFound):
        client.get(uuid.uuid4())
    with pytest.raises(NotFound):
        client.definition_versions(unique("nothing"))


def test_invalid_inputs_raise_invalid_input_naming_the_field(client: Client) -> None:
    key = unique("sdk-bad")
    with pytest.raises(InvalidInput) as info:
        client.submit("hello", {"name": 5}, idempotency_key=key)
    assert info.value.errors[0].path == "inputs.name"
    assert info.value.errors[0].message
    assert client.list(idempotency_key=key).items == []
    with pytest.raises(InvalidInput) as unknown:
        client.submit(unique("no-such-definition"), {})
    assert unknown.value.errors[0].path == "definitionUri"


def test_submit_many_reports_each_item(client: Client) -> None:
    p = unique("sdk-batch")
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)

    def item(name: object, key: str | None) -> SubmitRequest:
        return SubmitRequest("hello", {"name": name}, execute_at=at, idempotency_key=key)

    original = client.submit("hello", {"name": "Ada"}, at, f"{p}-old")
    results = client.submit_many(
        [
            item("Bob", f"{p}-new"),
            item("Ada", f"{p}-old"),
            item("Eve", f"{p}-old"),
            item(5, f"{p}-bad"),
            item("Bob", f"{p}-new"),
            SubmitRequest("registry://jobs/hello", {"name": "Dan"}, execute_at=at),
        ]
    )
    assert [r.status for r in results] == [201, 200, 409, 422, 200, 201]
    assert [r.ok for r in results] == [True, True, False, False, True, True]
    new, old, clash, bad, dup, keyless = results
    assert old.execution == original
    assert new.execution is not None and dup.execution is not None
    assert dup.execution.execution_id == new.execution.execution_id
    assert new.execution.inputs == {"name": "Bob", "times": 1}
    assert clash.execution is None and clash.error and clash.error["code"] == "conflict"
    assert f"{p}-old" in clash.error["message"]
    assert bad.execution is None and bad.error and bad.error["code"] == "invalid_input"
    assert bad.error["details"][0]["path"] == "inputs.name"
    assert keyless.execution and keyless.execution.idempotency_key
    assert client.list(idempotency_key=f"{p}-bad").items == []
    assert len(client.list(idempotency_key=f"{p}-new").items) == 1


def test_submit_many_answers_receipts_through_a_server(client: Client) -> None:
    """The blocking client over HTTP with ``answer="ids"``: ``Prefer: return=minimal`` to a
    real server, the full answer's outcomes as receipts."""
    p = unique("sdk-receipts")
    original = client.submit("hello", {"name": "Ada"}, None, f"{p}-old")
    receipts = client.submit_many(
        [
            SubmitRequest("hello", {"name": "Bob"}, idempotency_key=f"{p}-new"),
            SubmitRequest("hello", {"name": "Ada"}, idempotency_key=f"{p}-old"),
            SubmitRequest("hello", {"name": "Eve"}, idempotency_key=f"{p}-old"),
            SubmitRequest("hello", {"name": 5}, idempotency_key=f"{p}-bad"),
        ],
        answer="ids",
    )
    assert [r.status for r in receipts] == [201, 200, 409, 422]
    assert receipts[1].execution_id == original.execution_id
    new = receipts[0].execution_id
    assert new is not None and client.get(new).inputs == {"name": "Bob", "times": 1}
    assert receipts[2].error and receipts[2].error["code"] == "conflict"
    assert receipts[3].error and receipts[3].error["details"][0]["path"] == "inputs.name"


def test_a_due_submission_runs_and_wait_returns_its_output(client: Client) -> None:
    e = client.submit("hello", {"name": "Ada", "times": 2})
    done = client.wait(e.execution_id, timeout=20)
    assert done.status is ExecutionStatus.SUCCEEDED, done
    assert done.output == {"greeting": "Hello, Ada! Hello, Ada!"}
    attempts = client.attempts(e.execution_id)
    assert [(a.attempt_number, str(a.status)) for a in attempts] == [(1, "SUCCEEDED")]


def test_a_wrong_key_is_unauthorized(server: ServerProcess) -> None:
    with (
        Client(server.url, "tw_000000000000_not-a-key") as stranger,
        pytest.raises(Unauthorized, match="unknown or revoked"),
    ):
        stranger.list()
    with Client(server.url, None) as anonymous, pytest.raises(Unauthorized, match="missing"):
        anonymous.get(uuid.uuid4())


# =================================================================================================
# AsyncClient over the in-process transport, with a FakeClock: wait()
# =================================================================================================


async def register_greet(client: AsyncClient) -> None:
    await client.apply_definition(json.dumps(definition_doc()).encode(), "json")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
async def local(store: Store, clock: FakeClock) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(transport=InProcessTransport(store, TENANT, clock), clock=clock) as c:
        await register_greet(c)
        yield c


async def test_wait_times_out_on_the_fake_clock_without_sleeping(
    local: AsyncClient, clock: FakeClock
) -> None:
    e = await local.submit_after(timedelta(minutes=5), "greet", {"name": "Ada"})
    assert e.execute_at == T0 + timedelta(minutes=5)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="SCHEDULED") as info:
        await local.wait(e.execution_id, timeout=60)
    assert time.monotonic() - started < 1.0
    assert str(e.execution_id) in str(info.value)
    assert clock.now() >= T0 + timedelta(seconds=60)
    assert clock.now() < T0 + timedelta(seconds=65)


async def test_wait_returns_an_execution_that_already_finished(
    local: AsyncClient, clock: FakeClock
) -> None:
    e = await local.submit_after(timedelta(minutes=5), "greet", {"name": "Ada"})
    await local.cancel(e.execution_id)
    done = await local.wait(e.execution_id, timeout=60)
    assert done.status is ExecutionStatus.CANCELLED and done.finished
    assert clock.now() == T0, "a finished execution returns at the first look"


class AlarmClock(FakeClock):
    """A FakeClock that sets ``rang`` once it has been moved to ``alarm`` or past it."""

    def __init__(self, start: datetime, alarm: datetime) -> None:
        super().__init__(start)
        self.alarm = alarm
        self.rang = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))
        if self.now() >= self.alarm:
            self.rang.set()
        await asyncio.sleep(0)


async def test_wait_returns_once_the_execution_finishes_while_waiting(store: Store) -> None:
    clock = AlarmClock(T0, alarm=T0 + timedelta(seconds=10))
    transport = InProcessTransport(store, TENANT, clock)
    async with AsyncClient(transport=transport, clock=clock) as client:
        await register_greet(client)
        e = await client.submit_after(timedelta(minutes=5), "greet", {"name": "Ada"})

        async def cancel_at_the_alarm() -> None:
            await clock.rang.wait()
            await client.cancel(e.execution_id)

        canceller = asyncio.create_task(cancel_at_the_alarm())
        started = time.monotonic()
        done = await asyncio.wait_for(client.wait(e.execution_id, timeout=3600), timeout=5)
        await canceller
    assert time.monotonic() - started < 1.0
    assert done.status is ExecutionStatus.CANCELLED
    # The fake clock runs on while the cancel is in flight (each poll advances it), so only the
    # lower bound is exact; the upper one just says wait() stopped long before its timeout.
    assert T0 + timedelta(seconds=10) <= clock.now() < T0 + timedelta(seconds=600)


# =================================================================================================
# HttpTransport against the real app (ASGI), with requests and responses lost on purpose
# =================================================================================================


@dataclass
class Seen:
    method: str
    path: str
    idempotency_key: str | None
    body: bytes


@dataclass
class Flaky(httpx.AsyncBaseTransport):
    """Forwards to the app, except that the next requests fail as ``plan`` says:
    ``connect`` (never reaches the server), ``lost`` (reaches it, then the response times out),
    ``503`` (a proxy answers 503 without forwarding)."""

    inner: httpx.AsyncBaseTransport
    plan: list[str] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        self.seen.append(
            Seen(request.method, request.url.path, request.headers.get("Idempotency-Key"), body)
        )
        action = self.plan.pop(0) if self.plan else "forward"
        if action == "connect":
            raise httpx.ConnectError("connection refused", request=request)
        if action == "503":
            return httpx.Response(503, text="upstream unavailable", request=request)
        response = await self.inner.handle_async_request(request)
        if action == "lost":
            await response.aread()
            await response.aclose()
            raise httpx.ReadTimeout("timed out reading the response", request=request)
        assert action == "forward", action
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class Remote:
    client: AsyncClient
    flaky: Flaky
    store: Store
    clock: FakeClock
    app: httpx.ASGITransport

    async def stored(self) -> list[uuid.UUID]:
        rows = await self.store.execution_list(TENANT, ExecutionFilter(), None, 1000)
        return [e.execution_id for e in rows]

    def other(self, api_key: str | None) -> AsyncClient:
        """Another SDK client on the same app, with another key (or none)."""
        http = httpx.AsyncClient(transport=self.app, base_url=BASE_URL)
        return AsyncClient(
            transport=HttpTransport(BASE_URL, api_key, http=http, backoff=0), clock=self.clock
        )


def settings() -> Settings:
    return Settings(_env_file=None, insecure_no_auth=False, max_body_bytes=64 * 1024, tenant=TENANT)


@pytest.fixture
async def remote(store: Store, clock: FakeClock) -> AsyncIterator[Remote]:
    app = httpx.ASGITransport(app=create_app(store, settings(), clock))
    _, admin = await create_key(store, TENANT, Scope.ADMIN, "sdk test", clock.now())
    flaky = Flaky(app)
    http = httpx.AsyncClient(transport=flaky, base_url=BASE_URL)
    transport = HttpTransport(BASE_URL, admin, http=http, backoff=0)
    async with AsyncClient(transport=transport, clock=clock) as client:
        await register_greet(client)
        flaky.seen.clear()
        yield Remote(client, flaky, store, clock, app)


def submits(flaky: Flaky) -> list[Seen]:
    return [s for s in flaky.seen if (s.method, s.path) == ("POST", "/v1/executions")]


@pytest.mark.parametrize("key", [None, "order-42"], ids=["sdk-key", "caller-key"])
async def test_a_submit_whose_response_was_lost_is_retried_into_one_execution(
    remote: Remote, key: str | None
) -> None:
    remote.flaky.plan = ["lost"]
    e = await remote.client.submit("greet", {"name": "Ada"}, idempotency_key=key)
    tries = submits(remote.flaky)
    assert len(tries) == 2
    assert tries[0].idempotency_key and tries[0].idempotency_key == tries[1].idempotency_key
    assert tries[0].body == tries[1].body
    if key is None:
        assert tries[0].idempotency_key.startswith("sdk-")
    else:
        assert tries[0].idempotency_key == key
    assert e.idempotency_key == tries[0].idempotency_key
    assert await remote.stored() == [e.execution_id]


async def test_submit_after_a_lost_response_is_retried_into_one_execution(remote: Remote) -> None:
    remote.flaky.plan = ["lost", "lost"]
    e = await remote.client.submit_after(timedelta(minutes=5), "greet", {"name": "Ada"})
    assert len(submits(remote.flaky)) == 3
    assert len({s.idempotency_key for s in submits(remote.flaky)}) == 1
    assert e.execute_at == T0 + timedelta(minutes=5)
    assert await remote.stored() == [e.execution_id]


async def test_a_refused_connection_and_a_503_are_retried(remote: Remote) -> None:
    remote.flaky.plan = ["connect", "503"]
    e = await remote.client.submit("greet", {"name": "Ada"})
    assert len(submits(remote.flaky)) == 3
    assert len({s.idempotency_key for s in submits(remote.flaky)}) == 1
    assert await remote.stored() == [e.execution_id]


async def test_each_submit_without_a_key_gets_its_own_key(remote: Remote) -> None:
    a = await remote.client.submit("greet", {"name": "Ada"})
    b = await remote.client.submit("greet", {"name": "Ada"})
    assert a.execution_id != b.execution_id
    assert a.idempotency_key and b.idempotency_key and a.idempotency_key != b.idempotency_key
    assert sorted(await remote.stored()) == sorted([a.execution_id, b.execution_id])


async def test_a_batch_whose_response_was_lost_is_retried_with_the_same_keys(
    remote: Remote,
) -> None:
    remote.flaky.plan = ["lost"]
    requests = [SubmitRequest("greet", {"name": f"n{i}"}) for i in range(3)]
    requests.append(SubmitRequest("greet", {"name": "k"}, idempotency_key="mine"))
    results = await remote.client.submit_many(requests)
    batches = [s for s in remote.flaky.seen if s.path == "/v1/executions/batch"]
    assert len(batches) == 2 and batches[0].body == batches[1].body
    assert [r.status for r in results] == [200, 200, 200, 200], "the retry found the originals"
    ids = [r.execution.execution_id for r in results if r.execution]
    assert sorted(await remote.stored()) == sorted(ids) and len(set(ids)) == 4


async def test_retries_are_bounded_and_the_last_error_surfaces(remote: Remote) -> None:
    remote.flaky.plan = ["connect"] * 10
    with pytest.raises(httpx.ConnectError):
        await remote.client.submit("greet", {"name": "Ada"})
    assert len(submits(remote.flaky)) == 4  # one try and three retries (the default)
    assert await remote.stored() == []


async def test_a_persistent_503_becomes_an_error(remote: Remote) -> None:
    remote.flaky.plan = ["503"] * 10
    with pytest.raises(tickwheel.TickwheelError, match="upstream unavailable"):
        await remote.client.get(uuid.uuid4())
    assert len(remote.flaky.seen) == 4


async def test_a_cancel_whose_response_was_lost_still_reports_the_cancel(remote: Remote) -> None:
    e = await remote.client.submit_after(timedelta(minutes=5), "greet", {"name": "Ada"})
    remote.flaky.plan = ["lost"]
    cancelled = await remote.client.cancel(e.execution_id)
    assert cancelled.status is ExecutionStatus.CANCELLED


# -- error mapping --------------------------------------------------------------------------------


async def test_401_is_unauthorized(remote: Remote) -> None:
    async with remote.other("tw_000000000000_not-a-key") as stranger:
        with pytest.raises(Unauthorized, match="unknown or revoked") as info:
            await stranger.list()
        assert isinstance(info.value, PermissionError)
    async with remote.other(None) as anonymous:
        with pytest.raises(Unauthorized, match="missing API key"):
            await anonymous.submit("greet", {"name": "Ada"})


async def test_403_is_forbidden(remote: Remote) -> None:
    _, reader = await create_key(remote.store, TENANT, Scope.READ, "reader", remote.clock.now())
    async with remote.other(reader) as read_only:
        assert (await read_only.list()).items == []
        with pytest.raises(Forbidden, match="scope read") as info:
            await read_only.submit("greet", {"name": "Ada"})
        assert info.value.details == {"scope": "read", "needed": "submit"}
        with pytest.raises(Forbidden):
            await read_only.apply_definition(json.dumps(definition_doc("other")).encode(), "json")
    assert await remote.stored() == []


async def test_413_is_payload_too_large(remote: Remote) -> None:
    with pytest.raises(PayloadTooLarge):
        await remote.client.submit("greet", {"name": "x" * 100_000})
    assert await remote.stored() == []


@pytest.fixture(params=["http", "inprocess"])
def sdk(request: pytest.FixtureRequest, store: Store, clock: FakeClock) -> AsyncClient:
    """The same errors must come out of both transports."""
    if request.param == "http":
        remote: Remote = request.getfixturevalue("remote")
        return remote.client
    local: AsyncClient = request.getfixturevalue("local")
    return local


async def test_404_is_not_found(sdk: AsyncClient) -> None:
    with pytest.raises(NotFound) as info:
        await sdk.get(uuid.uuid4())
    assert isinstance(info.value, LookupError)
    with pytest.raises(NotFound, match="no definition named"):
        await sdk.definition_versions("nothing-here")


async def test_409_is_conflict(sdk: AsyncClient) -> None:
    first = await sdk.submit("greet", {"name": "Ada"}, idempotency_key="order-42")
    with pytest.raises(Conflict, match="order-42") as info:
        await sdk.submit("greet", {"name": "Bob"}, idempotency_key="order-42")
    assert info.value.details["executionId"] == str(first.execution_id)
    with pytest.raises(Conflict, match="only a FAILED execution"):
        await sdk.replay(first.execution_id)


async def test_422_is_invalid_input_with_the_fields(sdk: AsyncClient) -> None:
    with pytest.raises(InvalidInput) as info:
        await sdk.submit("greet", {"name": 5, "times": "x"}, idempotency_key="bad")
    paths = [e.path for e in info.value.errors]
    assert paths[0] == "inputs.name" and "inputs.times" in paths
    assert isinstance(info.value, ValueError)
    assert (await sdk.list(idempotency_key="bad")).items == []
    with pytest.raises(InvalidInput) as far:
        await sdk.submit("greet", {"name": "Ada"}, T0 + timedelta(days=3650))
    assert [e.path for e in far.value.errors] == ["executeAt"]
    with pytest.raises(InvalidInput) as naive:
        await sdk.submit("greet", {"name": "Ada"}, datetime(2026, 3, 1, 13, 0))
    assert [e.path for e in naive.value.errors] == ["executeAt"]


async def test_400_is_bad_request(sdk: AsyncClient) -> None:
    with pytest.raises(BadRequest, match="cursor"):
        await sdk.list(cursor="bad")
