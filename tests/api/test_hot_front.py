"""The hot routes in front of the middleware stack (``api/hot_front.py``) do the stack's work for
them: the same request metrics, the body limit and the NUL check (by handing such requests to the
stack), the loopback-only host check without authentication, the JSON 500 of an unexpected
error; and with FastAPI's native telemetry on, the stack answers. Both backends."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.factories import T0, definition_doc
from tickwheel.api import hot_front, hot_routes
from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.config import Settings
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.models import Scope
from tickwheel.observability.metrics import process_metrics
from tickwheel.store.protocol import Store

BODY = {"definitionUri": "registry://jobs/greet", "inputs": {"name": "Ada"}}
LIMIT = 64 * 1024
BASE = "http://testserver"


def _count(method: str, route: str, status: int) -> float:
    """The request metrics' count of one series (0: none yet)."""
    for family in process_metrics().http_duration.collect():
        for sample in family.samples:
            wanted = {"method": method, "route": route, "status": str(status)}
            if sample.name.endswith("_count") and sample.labels == wanted:
                return sample.value
    return 0.0


class Apps:
    def __init__(self, hot: httpx.AsyncClient, plain: httpx.AsyncClient, key: str) -> None:
        self.hot = hot
        self.plain = plain
        self.auth = {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def apps(store: Store) -> AsyncIterator[Apps]:
    clock = FakeClock(T0)
    settings = Settings(max_body_bytes=LIMIT, _env_file=None)  # type: ignore[call-arg]
    _, key = await create_key(store, "acme", Scope.ADMIN, "admin", T0)
    async with (
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(store, settings, clock)), base_url=BASE
        ) as hot,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(store, settings, clock, hot_routes=False)),
            base_url=BASE,
        ) as plain,
    ):
        r = await hot.put(
            "/v1/definitions", json=definition_doc(), headers={"Authorization": f"Bearer {key}"}
        )
        assert r.status_code == 201, r.text
        yield Apps(hot, plain, key)


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every body the hot routes wrote themselves."""
    written: list[bytes] = []
    dump = hot_routes._dump

    def counted(model: Any) -> bytes:
        written.append(dump(model))
        return written[-1]

    monkeypatch.setattr(hot_routes, "_dump", counted)
    return written


# (method, path, request, the series it is counted in): each through both apps in turn.
COUNTED: list[tuple[str, str, dict[str, Any], tuple[str, int]]] = [
    ("POST", "/v1/executions", {"json": BODY}, ("/v1/executions", 201)),
    ("POST", "/v1/executions", {"json": BODY, "key": "tw_0_nope"}, ("/v1/executions", 401)),
    ("POST", "/v1/executions", {"json": {**BODY, "priority": "x"}}, ("/v1/executions", 422)),
    (
        "POST",
        "/v1/executions",
        {"json": {**BODY, "definitionUri": "registry://jobs/nope"}},
        ("/v1/executions", 422),
    ),
    ("POST", "/v1/executions/batch", {"json": {"items": [BODY]}}, ("/v1/executions/batch", 200)),
    (
        "GET",
        "/v1/executions/0190a3c0-0000-7000-8000-000000000000",
        {},
        ("/v1/executions/{execution_id}", 404),
    ),
    (
        "POST",
        "/v1/executions",
        {"content": b"{" + b" " * LIMIT + b"}", "headers": {"content-type": "application/json"}},
        ("<unmatched>", 413),
    ),
    (
        "GET",
        "/v1/executions/0190a3c0-0000-7000-8000-000000000000?x=%00",
        {},
        ("<unmatched>", 422),
    ),
]


@pytest.mark.parametrize("case", range(len(COUNTED)))
async def test_answers_and_metrics_are_the_stacks(apps: Apps, case: int) -> None:
    method, path, request, (route, status) = COUNTED[case]
    request = dict(request)
    key = request.pop("key", None)
    headers = {**apps.auth, **request.pop("headers", {})}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    answers = []
    for http in (apps.hot, apps.plain):
        before = _count(method, route, status)
        answers.append(await http.request(method, path, headers=headers, **request))
        assert _count(method, route, status) == before + 1, (http is apps.hot, route, status)
    hot, plain = answers
    assert hot.status_code == plain.status_code == status, hot.text
    assert hot.headers.get("content-type") == plain.headers.get("content-type")
    if status not in (200, 201):  # a new execution has a new id and instant
        assert hot.content == plain.content


async def test_a_hot_answer_has_starlettes_headers(apps: Apps, answered: list[bytes]) -> None:
    hot = await apps.hot.post("/v1/executions", json=BODY, headers=apps.auth)
    assert answered == [hot.content]
    assert hot.status_code == 201
    assert list(hot.headers.items()) == [
        ("content-length", str(len(hot.content))),
        ("content-type", "application/json"),
    ]


async def test_an_unexpected_error_is_the_logged_json_500(
    apps: Apps, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(self: InProcessTransport, request: Any) -> Any:
        raise RuntimeError("a bug under the route")

    monkeypatch.setattr(InProcessTransport, "submit_model", broken)
    before = _count("POST", "/v1/executions", 500)
    with caplog.at_level(logging.ERROR, logger="tickwheel.api"):
        r = await apps.hot.post("/v1/executions", json=BODY, headers=apps.auth)
    assert r.status_code == 500
    assert json.loads(r.content)["error"]["code"] == "internal"
    assert "a bug under the route" not in r.text
    assert any("unhandled error on POST /v1/executions" in m for m in caplog.messages)
    assert _count("POST", "/v1/executions", 500) == before + 1


async def test_with_fastapis_telemetry_on_the_stack_answers(
    apps: Apps, answered: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hot_front, "_telemetry_on", lambda app: True)
    r = await apps.hot.post("/v1/executions", json=BODY, headers=apps.auth)
    assert r.status_code == 201, r.text
    assert answered == []  # FastAPI's route wrote it


async def test_without_auth_a_foreign_host_is_refused_on_the_hot_routes(
    store: Store, answered: list[bytes]
) -> None:
    settings = Settings(insecure_no_auth=True, _env_file=None)  # type: ignore[call-arg]
    app = create_app(store, settings, FakeClock(T0))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://localhost:8000"
    ) as http:
        assert (await http.put("/v1/definitions", json=definition_doc())).status_code == 201
        for host in ("evil.example", "127.0.0.1.evil.example"):
            r = await http.post("/v1/executions", json=BODY, headers={"Host": host})
            assert r.status_code == 421, r.text
        assert answered == []
        r = await http.post("/v1/executions", json=BODY)
        assert r.status_code == 201, r.text
        assert answered == [r.content]


@pytest.mark.parametrize("insecure", [False, True])
async def test_the_stack_holds_only_the_layers_the_front_does_the_work_of(
    store: Store, insecure: bool
) -> None:
    """The hot routes skip the stack, so a layer added to it would not see them: this list is
    the one ``HotFront`` does the work of. A new layer must be done there too (or the hot routes
    handed to the stack) before it joins this list."""
    from tickwheel.api.errors import ServerErrors
    from tickwheel.api.hosts import LoopbackHostOnly
    from tickwheel.api.limits import BodyLimit
    from tickwheel.api.request_metrics import RequestMetrics
    from tickwheel.api.trace_context import IncomingTrace

    settings = Settings(insecure_no_auth=insecure, _env_file=None)  # type: ignore[call-arg]
    app = create_app(store, settings, FakeClock(T0))
    layers = [m.cls for m in app.user_middleware]
    expected = [RequestMetrics, *([LoopbackHostOnly] if insecure else []), BodyLimit]
    assert layers == [*expected, IncomingTrace, ServerErrors]
