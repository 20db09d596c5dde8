"""An internal error answers the JSON 500 and leaves the connection usable (issue 12): Starlette's
last-resort handler re-raised after answering, and the server then dropped the kept-alive
connection without a word. Checked over a real server socket, on both backends."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from tests.factories import T0
from tickwheel.api.app import create_app
from tickwheel.config import Settings
from tickwheel.domain.clock import FakeClock
from tickwheel.store.protocol import Store


def app_with_a_bug(store: Store) -> FastAPI:
    settings = Settings(insecure_no_auth=True, _env_file=None)  # type: ignore[call-arg]
    app = create_app(store, settings, FakeClock(T0))

    @app.get("/v1/bug")
    async def bug() -> dict[str, Any]:
        raise RuntimeError("a bug in a route")

    return app


@pytest.fixture
async def server(store: Store) -> AsyncIterator[str]:
    # Bound and listening before the server starts: connections wait in the backlog.
    sock = socket.create_server(("127.0.0.1", 0))
    config = uvicorn.Config(app_with_a_bug(store), log_level="critical", lifespan="off")
    served = uvicorn.Server(config)
    task = asyncio.create_task(served.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        served.should_exit = True
        await task


async def test_a_500_keeps_the_connection_alive(server: str) -> None:
    connects: list[str] = []

    async def trace(event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            connects.append(event)

    async with httpx.AsyncClient(base_url=server) as http:
        for _ in range(2):
            r = await http.get("/v1/bug", extensions={"trace": trace})
            assert r.status_code == 500
            assert r.json()["error"]["code"] == "internal"
            assert r.headers.get("connection") != "close"
        ok = await http.get("/v1/executions", extensions={"trace": trace})
        assert ok.status_code == 200, ok.text
    assert len(connects) == 1, "the server closed the connection after the 500"


async def test_a_500_is_an_answer_not_an_exception(store: Store) -> None:
    transport = httpx.ASGITransport(app=app_with_a_bug(store))  # raises what the app raises
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        for _ in range(2):
            r = await http.get("/v1/bug")
            assert r.status_code == 500
            assert r.json()["error"] == {
                "code": "internal",
                "message": "internal error; the server log has the details",
                "details": None,
            }


async def test_request_metrics_still_count_a_500(store: Store) -> None:
    transport = httpx.ASGITransport(app=app_with_a_bug(store))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        assert (await http.get("/v1/bug")).status_code == 500
        metrics = (await http.get("/metrics")).text
    counted = [
        line
        for line in metrics.splitlines()
        if line.startswith("tickwheel_http_request_duration_seconds_count")
        and 'route="/v1/bug"' in line
    ]
    assert len(counted) == 1 and 'status="500"' in counted[0], counted
