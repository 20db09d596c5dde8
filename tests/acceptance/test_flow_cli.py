"""Pause and the circuit breaker end to end: a real ``tickwheel server`` (its scheduler and
worker in that process), a handler that fails on demand, and the CLI. A paused definition's
execution waits READY past its due time and runs once resumed; two failed attempts open the
breaker, the next execution waits, after the cool-down it runs as the probe and its success
closes the breaker; /metrics counts the transitions."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.acceptance.conftest import ServerProcess, describe, run_cli, start_server, wait_on_api

PAY = {
    "name": "pay",
    "version": 1,
    # The example adder: given a third input it fails (an unexpected argument), as a dependency
    # that is down; without it, it succeeds.
    "inputs": {"a": "integer", "b": "integer", "c": {"type": "integer", "required": False}},
    "outputs": {"sum": "integer"},
    "execution": {"type": "python", "entrypoint": "tickwheel.examples.jobs:add"},
    "timeout": 10,
    "retry": {"maxAttempts": 1},
    "circuitBreaker": {"consecutiveFailures": 2, "coolDown": "2s"},
}
DOWN = {"a": 1, "b": 2, "c": 3}
UP = {"a": 1, "b": 2}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    server = start_server(tmp_path / "server")
    try:
        yield server
    finally:
        server.stop()


def cli_json(server: ServerProcess, *args: str) -> Any:
    result = run_cli(*args, cwd=server.directory, server=server, as_json=True)
    assert result.returncode == 0, describe(result)
    return json.loads(result.stdout)


def cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    result = run_cli(*args, cwd=server.directory, server=server)
    assert result.returncode == 0, describe(result)
    return result


def submit(http: httpx.Client, inputs: dict[str, int]) -> str:
    r = http.post("/v1/executions", json={"definitionUri": "registry://jobs/pay", "inputs": inputs})
    assert r.status_code == 201, r.text
    return str(r.json()["executionId"])


def ended(server: ServerProcess, execution_id: str) -> str:
    body = wait_on_api(
        server,
        f"/v1/executions/{execution_id}",
        lambda e: e["status"] in ("SUCCEEDED", "FAILED", "CANCELLED"),
    )
    return str(body["status"])


def test_pause_resume_and_the_breaker_through_the_cli(
    server: ServerProcess, tmp_path: Path
) -> None:
    spec = tmp_path / "pay.json"
    spec.write_text(json.dumps(PAY))
    cli(server, "definitions", "apply", str(spec))
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=10) as http:
        # A manual pause: due now, but it waits READY until resumed.
        shown = cli(server, "definitions", "pause", "pay", "--reason", "deploy")
        assert "paused" in shown.stdout and "deploy" in shown.stdout, describe(shown)
        held = submit(http, UP)
        time.sleep(1.5)  # a worker polls and is woken far more often than this
        assert http.get(f"/v1/executions/{held}").json()["status"] == "READY"
        resumed = cli_json(server, "definitions", "resume", "pay")
        assert resumed["paused"] is False
        assert ended(server, held) == "SUCCEEDED"

        # Two failures open the breaker.
        assert [ended(server, submit(http, DOWN)) for _ in range(2)] == ["FAILED", "FAILED"]
        state = cli_json(server, "definitions", "flow", "pay")
        assert state["paused"] is True and state["circuitBreaker"]["state"] == "open"
        assert state["pauses"][0]["reason"] == "2 consecutive failed attempts"
        probe = submit(http, UP)
        assert http.get(f"/v1/executions/{probe}").json()["status"] == "READY"
        # After the 2 s cool-down it runs as the probe, and its success closes the breaker.
        assert ended(server, probe) == "SUCCEEDED"
        closed = wait_on_api(
            server, "/v1/definitions/pay/flow", lambda f: f["circuitBreaker"]["state"] == "closed"
        )
        assert [t["toState"] for t in closed["transitions"]] == ["closed", "half_open", "open"]
        shown = cli(server, "definitions", "flow", "pay")
        assert "the probe (execution" in shown.stdout, describe(shown)

        metrics = http.get("/metrics").text
    for to_state in ("open", "half_open", "closed"):
        line = (
            "tickwheel_circuit_breaker_transitions_total"
            f'{{definition="pay",to_state="{to_state}"}} 1.0'
        )
        assert line in metrics, metrics
    assert 'tickwheel_circuit_breakers{state="closed"} 1.0' in metrics


def test_a_start_by_that_passes_while_paused_ends_expired(
    server: ServerProcess, tmp_path: Path
) -> None:
    spec = tmp_path / "pay.json"
    spec.write_text(json.dumps(PAY))
    cli(server, "definitions", "apply", str(spec))
    cli(server, "tenant", "pause", "--reason", "maintenance")
    start_by = datetime.now(UTC) + timedelta(seconds=8)  # a CLI start takes seconds here
    result = run_cli(
        "submit", "pay", "--inputs", json.dumps(UP), "--start-by",
        start_by.isoformat().replace("+00:00", "Z"), "--wait", "--timeout", "30",
        cwd=server.directory, server=server,
    )  # fmt: skip
    assert result.returncode == 4, describe(result)  # EXPIRED: the code of "did not run"
    [line] = [ln for ln in result.stdout.splitlines() if "EXPIRED" in ln] or [result.stdout]
    assert "EXPIRED" in line, describe(result)
    shown = cli_json(server, "list", "--status", "EXPIRED")
    [expired] = shown["items"]
    assert expired["error"]["message"] == "not started by its startBy"
    assert expired["startBy"] and expired["attemptCount"] == 0
    assert cli_json(server, "tenant", "resume")["paused"] is False


def test_rate_limits_through_the_cli(server: ServerProcess, tmp_path: Path) -> None:
    """A definition file's rateLimit holds a burst of submissions to its budget on a real
    server; the tenant's own limit is set, shown and lifted by the CLI."""
    limited = {**PAY, "name": "paced", "rateLimit": {"limit": 4, "period": "1s", "burst": 2}}
    del limited["circuitBreaker"]
    spec = tmp_path / "paced.json"
    spec.write_text(json.dumps(limited))
    cli(server, "definitions", "apply", str(spec))
    shown = cli_json(server, "tenant", "rate-limit", "50", "--period", "2s", "--burst", "5")
    [mine] = shown["rateLimits"]
    assert (mine["definition"], mine["limit"], mine["period"], mine["burst"]) == (None, 50, 2, 5)
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=10) as http:
        ids = []
        for _ in range(6):
            r = http.post(
                "/v1/executions", json={"definitionUri": "registry://jobs/paced", "inputs": UP}
            )
            assert r.status_code == 201, r.text
            ids.append(r.json()["executionId"])
        starts = sorted(
            datetime.fromisoformat(
                wait_on_api(server, f"/v1/executions/{i}", lambda e: e["status"] == "SUCCEEDED")[
                    "startedAt"
                ].replace("Z", "+00:00")
            )
            for i in ids
        )
    # Burst 2, then 4 a second: six starts take at least a second.
    assert (starts[-1] - starts[0]).total_seconds() >= 0.95, starts
    text = cli(server, "tenant", "show").stdout
    assert "rate limit of the whole tenant: 50 per 2s, burst 5" in text, text
    assert "rate limit of paced: 4 per 1s, burst 2" in text, text
    flow = cli_json(server, "definitions", "flow", "paced")
    assert [r["definition"] for r in flow["rateLimits"]] == [None, "paced"]
    assert cli_json(server, "tenant", "clear-rate-limit")["rateLimits"][0]["definition"] == "paced"
    refused = run_cli("tenant", "rate-limit", "0", cwd=server.directory, server=server)
    assert refused.returncode != 0 and "limit" in refused.stdout + refused.stderr, describe(refused)


def test_a_tenants_weight_through_the_cli(server: ServerProcess) -> None:
    """The operator key the server made sets a tenant's weight in the fair claim, `tenant show`
    prints it, a weight out of range is refused with nothing changed, and clearing it (weight
    1) takes it off the show."""
    tenant = str(cli_json(server, "tenant", "show")["tenant"])
    shown = cli_json(server, "tenant", "weight", "3", "--tenant", tenant)
    assert (shown["tenant"], shown["weight"]) == (tenant, 3)
    assert "weight 3 in the fair claim" in cli(server, "tenant", "show").stdout
    refused = run_cli(
        "tenant", "weight", "0", "--tenant", tenant, cwd=server.directory, server=server
    )
    assert refused.returncode != 0 and "weight" in refused.stdout + refused.stderr, describe(
        refused
    )
    assert cli_json(server, "tenant", "show")["weight"] == 3
    assert cli_json(server, "tenant", "weight", "1", "--tenant", tenant)["weight"] == 1
    assert "in the fair claim" not in cli(server, "tenant", "show").stdout
