"""The hot routes (``api/hot_routes.py``) answer what the FastAPI routes answer, byte for byte:
the same request to an app with them and to one without gets the same status, content type and
body, on both backends, for answers and refusals alike."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.factories import T0, definition_doc
from tickwheel.api import hot_routes
from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.api.hot_front import HotApp
from tickwheel.config import Settings
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.models import Scope
from tickwheel.store.protocol import Store

BODY = {"definitionUri": "registry://jobs/greet", "inputs": {"name": "Ada"}}


class Pair:
    """Two apps on one store: ``hot`` as the server runs it, ``plain`` without the hot routes."""

    def __init__(self, hot: httpx.AsyncClient, plain: httpx.AsyncClient, keys: dict[str, str]):
        self.hot = hot
        self.plain = plain
        self.keys = keys

    async def both(
        self, method: str, path: str, *, key: str = "admin", **kw: Any
    ) -> tuple[httpx.Response, httpx.Response]:
        headers = {"Authorization": f"Bearer {self.keys[key]}", **kw.pop("headers", {})}
        hot = await self.hot.request(method, path, headers=headers, **kw)
        plain = await self.plain.request(method, path, headers=headers, **kw)
        return hot, plain


@pytest.fixture
async def pair(store: Store) -> AsyncIterator[Pair]:
    clock = FakeClock(T0)
    settings = Settings(max_body_bytes=64 * 1024, _env_file=None)  # type: ignore[call-arg]
    hot_app = create_app(store, settings, clock)
    plain_app = create_app(store, settings, clock, hot_routes=False)
    assert isinstance(hot_app, HotApp) and hot_app.hot is not None
    assert isinstance(plain_app, HotApp) and plain_app.hot is None
    keys = {}
    for scope in (Scope.ADMIN, Scope.READ):
        _, keys[scope.value] = await create_key(store, "acme", scope, str(scope), T0)
    keys["other"] = (await create_key(store, "globex", Scope.ADMIN, "other", T0))[1]
    keys["unknown"] = "tw_0123456789ab_nope"
    base = "http://testserver"
    async with (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=hot_app), base_url=base) as hot,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=plain_app), base_url=base) as plain,
    ):
        r = await hot.put(
            "/v1/definitions",
            json=definition_doc(),
            headers={"Authorization": f"Bearer {keys['admin']}"},
        )
        assert r.status_code == 201, r.text
        yield Pair(hot, plain, keys)


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every body the hot routes wrote themselves (not handed on to FastAPI's)."""
    written: list[bytes] = []
    dump = hot_routes._dump

    def counted(model: Any) -> bytes:
        written.append(dump(model))
        return written[-1]

    monkeypatch.setattr(hot_routes, "_dump", counted)
    return written


def same(hot: httpx.Response, plain: httpx.Response) -> None:
    assert hot.status_code == plain.status_code, (hot.text, plain.text)
    assert hot.headers.get("content-type") == plain.headers.get("content-type")
    assert hot.headers.get("www-authenticate") == plain.headers.get("www-authenticate")
    assert hot.content == plain.content


async def test_a_submit_and_its_repeat_are_the_same_bytes(
    pair: Pair, answered: list[bytes]
) -> None:
    # Submitted through the hot route, repeated through FastAPI's: the original both times.
    headers = {"Idempotency-Key": "k-1"}
    first = await pair.hot.post(
        "/v1/executions",
        json=BODY,
        headers={**headers, "Authorization": f"Bearer {pair.keys['admin']}"},
    )
    assert first.status_code == 201, first.text
    hot, plain = await pair.both("POST", "/v1/executions", json=BODY, headers=headers)
    assert hot.status_code == 200
    same(hot, plain)
    assert json.loads(hot.content) == first.json()
    assert "cancelRequestedAt" not in first.json()  # left out, not null, on both
    assert answered == [first.content, hot.content]


async def test_a_read_is_the_same_bytes(pair: Pair, answered: list[bytes]) -> None:
    created = await pair.hot.post(
        "/v1/executions",
        json={**BODY, "priority": 3, "concurrency": {"key": "x", "limit": 2}},
        headers={"Authorization": f"Bearer {pair.keys['admin']}"},
    )
    assert created.status_code == 201, created.text
    execution_id = created.json()["executionId"]
    hot, plain = await pair.both("GET", f"/v1/executions/{execution_id}", key="read")
    assert hot.status_code == 200
    same(hot, plain)
    assert hot.json() == created.json()
    assert answered == [created.content, hot.content]
    # The upper-case spelling of the same id, and another tenant's key (404) alike.
    same(*await pair.both("GET", f"/v1/executions/{execution_id.upper()}"))
    same(*await pair.both("GET", f"/v1/executions/{execution_id}", key="other"))


async def test_a_batch_is_the_same_bytes(pair: Pair, answered: list[bytes]) -> None:
    items = [
        {**BODY, "idempotencyKey": "b-1"},
        {**BODY, "idempotencyKey": "b-2", "executeAt": "2026-03-01T14:00:00Z"},
        {"definitionUri": "registry://jobs/nope", "idempotencyKey": "b-3"},
    ]
    await pair.hot.post(
        "/v1/executions",
        json=BODY,
        headers={"Idempotency-Key": "b-4", "Authorization": f"Bearer {pair.keys['admin']}"},
    )
    items.append({**BODY, "inputs": {"name": "Bob"}, "idempotencyKey": "b-4"})  # 409
    first = await pair.hot.post(
        "/v1/executions/batch",
        json={"items": items},
        headers={"Authorization": f"Bearer {pair.keys['admin']}"},
    )
    assert [i["status"] for i in first.json()["items"]] == [201, 201, 422, 409]
    hot, plain = await pair.both("POST", "/v1/executions/batch", json={"items": items})
    assert [i["status"] for i in hot.json()["items"]] == [200, 200, 422, 409]
    same(hot, plain)
    assert answered[-2:] == [first.content, hot.content]


async def test_a_minimal_batch_is_the_same_bytes(pair: Pair, answered: list[bytes]) -> None:
    # ``Prefer`` goes on to the FastAPI route, which reads it (api/prefer.py).
    items = [{**BODY, "idempotencyKey": "m-1"}, {"definitionUri": "registry://jobs/nope"}]
    minimal = {"Prefer": "return=minimal"}
    await pair.hot.post(
        "/v1/executions/batch",
        json={"items": items},
        headers={**minimal, "Authorization": f"Bearer {pair.keys['admin']}"},
    )
    hot, plain = await pair.both(
        "POST", "/v1/executions/batch", json={"items": items}, headers=minimal
    )
    assert [i["status"] for i in hot.json()["items"]] == [200, 422]
    same(hot, plain)
    assert hot.headers["preference-applied"] == plain.headers["preference-applied"]
    assert answered == []


REFUSED: list[tuple[str, str, dict[str, Any]]] = [
    # (key, path, request) -> each refusal, through both apps
    (
        "admin",
        "/v1/executions",
        {"content": b"{not json", "headers": {"content-type": "application/json"}},
    ),
    (
        "admin",
        "/v1/executions",
        {"content": b"\xff\xfe", "headers": {"content-type": "application/json"}},
    ),
    ("admin", "/v1/executions", {"json": {**BODY, "priority": "1"}}),
    ("admin", "/v1/executions", {"json": {**BODY, "surprise": 1}}),
    ("admin", "/v1/executions", {"json": [BODY]}),
    ("admin", "/v1/executions", {"content": json.dumps(BODY).encode()}),  # no content type
    (
        "admin",
        "/v1/executions",
        {"content": json.dumps(BODY), "headers": {"content-type": "text/plain"}},
    ),
    ("admin", "/v1/executions", {"content": b""}),
    ("admin", "/v1/executions", {"json": {**BODY, "definitionUri": "registry://jobs/nope"}}),
    ("admin", "/v1/executions", {"json": BODY, "headers": {"Idempotency-Key": "x" * 1000}}),
    ("read", "/v1/executions", {"json": BODY}),
    ("read", "/v1/executions", {"json": {"priority": "high"}}),
    ("unknown", "/v1/executions", {"json": BODY}),
    (
        "unknown",
        "/v1/executions",
        {"content": b"{", "headers": {"content-type": "application/json"}},
    ),
    ("admin", "/v1/executions/batch", {"json": {"items": []}}),
    ("read", "/v1/executions/batch", {"json": {"items": [BODY]}}),
    ("admin", "/v1/executions/batch", {"json": {"items": [BODY], "more": 1}}),
]


@pytest.mark.parametrize("case", range(len(REFUSED)))
async def test_refusals_are_the_same_bytes(pair: Pair, case: int) -> None:
    key, path, request = REFUSED[case]
    hot, plain = await pair.both("POST", path, key=key, **request)
    assert hot.status_code >= 400, hot.text
    same(hot, plain)


async def test_reads_refused_and_other_methods_are_the_same_bytes(pair: Pair) -> None:
    missing = uuid.uuid4()
    for path in (
        f"/v1/executions/{missing}",
        "/v1/executions/not-a-uuid",
        f"/v1/executions/{missing.hex}",
    ):
        same(*await pair.both("GET", path))
        same(*await pair.both("GET", path, key="unknown"))
    same(*await pair.both("HEAD", f"/v1/executions/{missing}"))
    same(*await pair.both("PUT", "/v1/executions", json=BODY))
    same(*await pair.both("GET", "/v1/executions/batch"))


async def _chunks(size: int) -> AsyncIterator[bytes]:
    yield b'{"definitionUri": "registry://jobs/greet", "inputs": {"name": "'
    for _ in range(size // 1024):
        yield b"a" * 1024
    yield b'"}}'


@pytest.mark.parametrize("path", ["/v1/executions", "/v1/executions/batch"])
async def test_a_chunked_body_over_the_limit_is_413_and_no_internal_error(
    pair: Pair, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The body limit answers 413 and makes the read fail: that failure is not an internal error
    # (none is logged), as on FastAPI's routes.
    hot, plain = await pair.both(
        "POST", path, content=_chunks(200 * 1024), headers={"content-type": "application/json"}
    )
    assert hot.status_code == 413
    same(hot, plain)
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
