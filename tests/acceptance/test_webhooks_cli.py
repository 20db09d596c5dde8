"""Failure notifications end to end: a real ``tickwheel server`` whose operator allows loopback
(``TICKWHEEL_HTTP_ALLOW_NETWORKS``), a receiver on loopback, the CLI adding a webhook, and an
execution that dead-letters: the receiver gets one signed delivery the CLI then lists."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.acceptance.conftest import (
    ServerProcess,
    clean_env,
    describe,
    run_cli,
    start_server,
    wait_on_api,
)
from tests.engine.test_webhook_sender import Receiver, receiver  # noqa: F401 - the fixture
from tickwheel.domain.webhooks import verify

BROKEN = {
    "name": "hook-broken",
    "version": 1,
    "inputs": {"a": "integer", "b": "integer", "c": "integer"},
    "outputs": {"sum": "integer"},
    "execution": {"type": "python", "entrypoint": "tickwheel.examples.jobs:add"},
    "timeout": 10,
    "retry": {"maxAttempts": 1},
}


@pytest.fixture
def hooked_server(tmp_path: Path) -> Iterator[ServerProcess]:
    env = clean_env(TICKWHEEL_HTTP_ALLOW_NETWORKS="127.0.0.0/8")
    server = start_server(tmp_path / "server", env=env)
    try:
        yield server
    finally:
        server.stop()


def cli(server: ServerProcess, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    result = run_cli(*args, cwd=server.directory, server=server)
    assert result.returncode == code, describe(result)
    return result


def _json(server: ServerProcess, *args: str) -> Any:
    result = run_cli(*args, cwd=server.directory, server=server, as_json=True)
    assert result.returncode == 0, describe(result)
    return json.loads(result.stdout)


def test_a_dead_letter_reaches_a_webhook_added_from_the_cli(
    hooked_server: ServerProcess,
    receiver: Receiver,  # noqa: F811 - the fixture
) -> None:
    server = hooked_server
    refused = cli(server, "webhooks", "add", "http://169.254.169.254/x", code=2)
    assert "link-local" in refused.stderr, describe(refused)
    made = _json(server, "webhooks", "add", receiver.url, "-e", "execution.failed")
    secret, webhook_id = made["secret"], made["webhookId"]
    listed = cli(server, "webhooks", "list")
    assert webhook_id in listed.stdout and secret not in listed.stdout
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=10) as http:
        r = http.put("/v1/definitions", json=BROKEN)
        assert r.status_code in (200, 201), r.text
    cli(server, "submit", "hook-broken", "--inputs", '{"a": 1, "b": 2, "c": 3}', "--wait", code=3)
    deliveries = wait_on_api(
        server,
        f"/v1/webhooks/{webhook_id}/deliveries",
        lambda body: bool(body["items"]) and body["items"][0]["status"] == "DELIVERED",
    )
    assert deliveries["items"][0]["status"] == "DELIVERED", deliveries
    [(headers, body)] = receiver.got
    assert verify(secret, headers["tickwheel-signature"], body, int(time.time()))
    assert json.loads(body)["type"] == "execution.failed"
    shown = cli(server, "webhooks", "deliveries", webhook_id)
    assert "DELIVERED" in shown.stdout and "execution.failed" in shown.stdout
    cli(server, "webhooks", "remove", webhook_id)
    assert _json(server, "webhooks", "list") == []
