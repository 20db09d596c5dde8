"""The recipes of ``examples/python`` run: the FastAPI app and the Django-style script submit the
invoice job in the order's own transaction (both backends), and a worker then runs it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import tickwheel
from tests.client.conftest import Database
from tickwheel.engine.worker import Worker
from tickwheel.store.factory import open_store

RECIPES = Path(__file__).resolve().parents[2] / "examples" / "python"


@pytest.fixture
def shop(database: Database, monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    monkeypatch.syspath_prepend(str(RECIPES))
    monkeypatch.setenv("TICKWHEEL_DATABASE_URL", database.url)
    yield database
    if database.kind == "postgres":
        import psycopg

        with psycopg.connect(database.url, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS orders")


async def _work(url: str) -> int:
    store = await open_store(url)
    try:
        worker = Worker(store, worker_id="w1")
        ran = await worker.run_once()
        await worker.drain()
        return ran
    finally:
        await store.close()


def _orders(url: str) -> list[Any]:
    from shop.db import connect

    conn = connect(url)
    try:
        return [tuple(r) for r in conn.execute("SELECT order_id FROM orders").fetchall()]
    finally:
        conn.close()


async def test_the_fastapi_app_submits_in_the_orders_transaction(shop: Database) -> None:
    from web import api, lifespan

    transport = httpx.ASGITransport(app=api)
    async with lifespan(api), httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        placed = await http.post("/orders", json={"order_id": "o-1", "total_cents": 1200})
        assert placed.status_code == 201, placed.text
        again = await http.post("/orders", json={"order_id": "o-1", "total_cents": 999})
        assert again.status_code == 409  # the order failed: its job is not there either
    assert _orders(shop.url) == [("o-1",)]
    assert await _work(shop.url) == 1
    with tickwheel.connect(shop.url) as client:
        [execution] = client.list().items
        assert str(execution.execution_id) == placed.json()["invoice_execution_id"]
        assert client.output(execution.execution_id) == {"invoice_number": "INV-o-1-1200"}


def test_the_django_style_script_commits_the_order_and_its_job(shop: Database) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
    env["TICKWHEEL_DATABASE_URL"] = shop.url
    run = subprocess.run(
        [sys.executable, str(RECIPES / "place_order.py"), "o-7", "700"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert _orders(shop.url) == [("o-7",)]
    assert asyncio.run(_work(shop.url)) == 1
    with tickwheel.connect(shop.url) as client:
        execution = client.get(run.stdout.strip())
        assert execution.status == "SUCCEEDED"
        assert client.output(execution.execution_id) == {"invoice_number": "INV-o-7-700"}
