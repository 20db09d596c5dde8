"""Registration refuses what no worker runs, with a 422 that says why and nothing stored; and
credentials travel as references: resolved on the worker, never in an API response."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.api.conftest import Api
from tests.engine.helpers import LoopbackServer, Seen
from tests.factories import T0, stored
from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.config import Settings
from tickwheel.domain.addresses import IPAddress
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.definitions import definition_from_document
from tickwheel.domain.models import Scope
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.engine.runners import HttpRunner, Secrets
from tickwheel.engine.worker import Worker
from tickwheel.store.protocol import Store

SECRET = "s3cr3t-t0ken-value"


def doc(execution: dict[str, Any], name: str = "sneaky") -> dict[str, Any]:
    return {"name": name, "version": 1, "execution": execution}


async def refused(api: Api, execution: dict[str, Any], path: str, words: str) -> None:
    r = await api.http.put("/v1/definitions", json=doc(execution))
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_input"
    assert any(d["path"] == path and words in d["message"] for d in error["details"]), error
    assert (await api.http.get("/v1/definitions/sneaky")).status_code == 404


@pytest.mark.parametrize("entrypoint", ["os:system", "subprocess:run", "builtins:eval"])
async def test_standard_library_entrypoints_are_refused(api: Api, entrypoint: str) -> None:
    execution = {"type": "python", "entrypoint": entrypoint}
    await refused(api, execution, "execution.entrypoint", "standard library")


async def test_tickwheel_internals_are_refused_but_examples_are_not(api: Api) -> None:
    internal = {"type": "python", "entrypoint": "tickwheel.server:prepare"}
    await refused(api, internal, "execution.entrypoint", "tickwheel itself")
    example = {"type": "python", "entrypoint": "tickwheel.examples.jobs:add"}
    assert (await api.http.put("/v1/definitions", json=doc(example))).status_code == 201


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/metrics",
        "http://[::1]:8000/metrics",
        "http://169.254.169.254/latest/meta-data/iam/",
        "http://2130706433:8000/metrics",
        "http://10.0.0.1/",
        "http://localhost:8000/metrics",
    ],
)
async def test_http_to_denied_addresses_is_refused(api: Api, url: str) -> None:
    await refused(api, {"type": "http", "url": url}, "execution.url", "TICKWHEEL_HTTP_ALLOW")


async def test_only_http_and_https(api: Api) -> None:
    r = await api.http.put("/v1/definitions", json=doc({"type": "http", "url": "file:///etc/x"}))
    assert r.status_code == 422


@pytest.mark.parametrize("image", ["--privileged", "--help", "-it"])
async def test_an_option_is_no_image(api: Api, image: str) -> None:
    await refused(api, {"type": "container", "image": image}, "execution.image", "image reference")


async def test_literal_credentials_are_refused_with_a_pointer_to_references(api: Api) -> None:
    execution = {
        "type": "http",
        "url": "https://hooks.example.com/x",
        "headers": {"Authorization": f"Bearer {SECRET}"},
    }
    await refused(api, execution, "execution.headers.Authorization", "${{ secrets.")
    r = await api.http.put("/v1/definitions", json=doc(execution))
    assert SECRET not in r.text


async def hook(request: Seen) -> tuple[int, dict[str, str], bytes]:
    echoed = json.dumps({"echo": request.headers.get("authorization")})
    return 500, {"Content-Type": "application/json"}, echoed.encode()


@pytest.fixture
async def server() -> AsyncIterator[LoopbackServer]:
    s = LoopbackServer({"/hook": hook})
    await s.start()
    yield s
    await s.close()


async def test_secrets_are_resolved_on_the_worker_and_never_returned(
    api: Api, server: LoopbackServer
) -> None:
    port = server.url.rsplit(":", 1)[1]
    execution = {
        "type": "http",
        "url": f"http://hooks.internal.test:{port}/hook",
        "headers": {"Authorization": "Bearer ${{ secrets.HOOK_TOKEN }}"},
    }
    r = await api.http.put("/v1/definitions", json=doc(execution, "hook"))
    assert r.status_code == 201, r.text
    assert r.json()["execution"]["headers"] == {"Authorization": "Bearer ${{ secrets.HOOK_TOKEN }}"}

    async def resolve(host: str, port: int) -> list[IPAddress]:
        assert host == "hooks.internal.test"
        return [ipaddress.ip_address("127.0.0.1")]

    runner = HttpRunner(
        policy=RunPolicy(http_allow_hosts=("hooks.internal.test",)),
        resolve=resolve,
        secrets=Secrets(environ={"TICKWHEEL_SECRET_HOOK_TOKEN": SECRET}),
    )
    worker = Worker(api.store, api.clock, worker_id="w1", runners={"http": runner})
    r = await api.http.post(
        "/v1/executions", json={"definitionUri": "registry://jobs/hook", "inputs": {}}
    )
    eid = r.json()["executionId"]
    assert await worker.run_once() == 1
    await worker.drain()
    assert server.seen[0].headers["authorization"] == f"Bearer {SECRET}"

    got = (await api.http.get(f"/v1/executions/{eid}")).json()
    assert got["error"]["kind"] == "server_error"
    reads = [
        f"/v1/executions/{eid}",
        f"/v1/executions/{eid}/attempts",
        "/v1/executions",
        "/v1/definitions",
        "/v1/definitions/hook/versions/1",
    ]
    for path in reads:
        r = await api.http.get(path)
        assert r.status_code == 200 and SECRET not in r.text, path
    assert "Bearer ***" in json.dumps(got["error"])


async def test_registration_follows_the_servers_own_http_allowances(store: Store) -> None:
    """An operator who lets workers call a loopback service (``TICKWHEEL_HTTP_ALLOW_NETWORKS``)
    can register definitions that call it: the API judges registration by the same settings."""
    allowing = Settings(http_allow_networks="127.0.0.0/8", _env_file=None)  # type: ignore[call-arg]
    _, admin = await create_key(store, "acme", Scope.ADMIN, "admin", T0)
    execution = {"type": "http", "url": "http://127.0.0.1:8000/hook"}
    for settings, status in ((allowing, 201), (Settings(_env_file=None), 422)):  # type: ignore[call-arg]
        app = create_app(store, settings, FakeClock(T0))
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://testserver",
            headers={"Authorization": f"Bearer {admin}"},
        ) as http:
            name = f"hook{status}"
            r = await http.put("/v1/definitions", json=doc(execution, name))
            assert r.status_code == status, r.text


async def test_credentials_stored_before_references_were_required_are_never_returned(
    api: Api,
) -> None:
    """A definition registered by an older version may still hold a literal credential: the API
    hides it (the worker refuses to run it), and shows references and harmless values as they
    are."""
    legacy = definition_from_document(
        doc(
            {
                "type": "http",
                "url": "https://ops:hunter2@hooks.example.com/h?api_key=abcdef123456&page=2",
                "headers": {
                    "Authorization": "Bearer legacy-token-0123456789abcdef",
                    "X-Api-Key": "${{ secrets.HOOK_KEY }}",
                    "X-Team": "billing",
                },
            },
            name="legacy",
        )
    )
    assert await api.store.definition_insert(stored(legacy, owner="acme"))
    for path in ("/v1/definitions/legacy/versions/1", "/v1/definitions/legacy", "/v1/definitions"):
        r = await api.http.get(path)
        assert r.status_code == 200, r.text
        for leaked in ("hunter2", "abcdef123456", "legacy-token"):
            assert leaked not in r.text, (path, leaked)
    shown = (await api.http.get("/v1/definitions/legacy/versions/1")).json()["execution"]
    assert shown["headers"]["X-Api-Key"] == "${{ secrets.HOOK_KEY }}"
    assert shown["headers"]["X-Team"] == "billing"
    assert "hidden" in shown["headers"]["Authorization"]
    assert shown["url"].startswith("https://ops:***@hooks.example.com/h?")
    assert "page=2" in shown["url"]
