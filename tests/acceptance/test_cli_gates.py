"""The CLI as a CI script uses it: ``--wait`` exits with how the run ended (a gate), and
``--json`` works after the command as well as before it. Real server, real CLI processes."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer.main
import yaml

from tests.acceptance.conftest import (
    REPO,
    TICKWHEEL,
    ServerProcess,
    clean_env,
    describe,
    run_cli,
    wait_on_api,
)
from tickwheel.cli.context import ExitCode
from tickwheel.cli.main import app

# A python definition whose inputs do not fit its function: every attempt fails for good.
BROKEN = {
    "name": "gate-broken",
    "version": 1,
    "inputs": {"a": "integer", "b": "integer", "c": "integer"},
    "outputs": {"sum": "integer"},
    "execution": {"type": "python", "entrypoint": "tickwheel.examples.jobs:add"},
    "timeout": 10,
    "retry": {"maxAttempts": 1},
}
BROKEN_WORKFLOW = {
    "name": "gate-broken-flow",
    "version": 1,
    "tasks": [
        {
            "name": "only",
            "definition": "registry://jobs/gate-broken",
            "inputs": {"a": 1, "b": 2, "c": 3},
        }
    ],
}


@pytest.fixture(scope="module")
def broken(server: ServerProcess) -> str:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=10) as http:
        response = http.put(
            "/v1/definitions",
            content=json.dumps(BROKEN),
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code in (200, 201), response.text
    return str(BROKEN["name"])


def cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=server.directory, server=server)


def _json(result: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(result.stdout)


# -- submit --wait as a gate -----------------------------------------------------------------------


def test_submit_wait_exits_0_when_it_succeeded(server: ServerProcess) -> None:
    result = cli(server, "submit", "add", "-i", "a=1", "-i", "b=2", "--wait", "--json")
    assert result.returncode == ExitCode.OK == 0, describe(result)
    assert _json(result)["status"] == "SUCCEEDED"


def test_submit_takes_a_concurrency_limit_and_runs_it(server: ServerProcess) -> None:
    key = "${{ inputs.a }}"
    result = cli(
        server, "submit", "add", "-i", "a=1", "-i", "b=2", "--concurrency-limit", "2",
        "--concurrency-key", key, "--concurrency-order", "none", "--wait", "--json",
    )  # fmt: skip
    assert result.returncode == 0, describe(result)
    answer = _json(result)
    assert answer["status"] == "SUCCEEDED"
    assert answer["concurrency"] == {"key": "1", "limit": 2, "order": "none"}
    shown = cli(server, "get", answer["executionId"])
    assert "at most 2 of key '1' at once, order none" in shown.stdout, describe(shown)
    lonely = cli(server, "submit", "add", "-i", "a=1", "-i", "b=2", "--concurrency-key", key)
    assert lonely.returncode == 2 and "--concurrency-limit" in lonely.stderr, describe(lonely)
    bad = cli(server, "submit", "add", "-i", "a=1", "-i", "b=2", "--concurrency-limit", "0")
    assert bad.returncode == 2 and "concurrency.limit" in bad.stderr, describe(bad)


def test_submit_wait_exits_3_when_the_execution_failed(server: ServerProcess, broken: str) -> None:
    result = cli(server, "submit", broken, "--inputs", '{"a": 1, "b": 2, "c": 3}', "--wait")
    assert result.returncode == ExitCode.FAILED == 3, describe(result)
    assert "FAILED" in result.stdout and "ended FAILED" in result.stderr
    # With --json the execution is still printed, for the script to read why.
    again = cli(
        server, "submit", broken, "--inputs", '{"a": 1, "b": 2, "c": 3}', "--wait", "--json"
    )
    assert again.returncode == 3, describe(again)
    assert _json(again)["status"] == "FAILED" and _json(again)["error"]


def test_submit_wait_exits_4_when_the_execution_is_cancelled(server: ServerProcess) -> None:
    key = f"gate-cancel-{uuid.uuid4().hex[:8]}"
    args = [str(TICKWHEEL), "--url", server.url, "--api-key", str(server.admin_key)]
    args += ["submit", "hello", "-i", "name=Ada", "--in", "1h", "--key", key, "--wait"]
    waiting = subprocess.Popen(
        args, cwd=server.directory, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        page = wait_on_api(server, "/v1/executions", lambda b: bool(b["items"]), idempotencyKey=key)
        assert page["items"], "the submission never arrived"
        execution_id = page["items"][0]["executionId"]
        with httpx.Client(base_url=server.url, headers=server.headers(), timeout=10) as http:
            assert http.delete(f"/v1/executions/{execution_id}").status_code == 200
        out, err = waiting.communicate(timeout=30)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
    assert waiting.returncode == ExitCode.CANCELLED == 4, (out, err)
    assert b"ended CANCELLED" in err


def test_submit_wait_exits_5_when_the_timeout_passes_first(server: ServerProcess) -> None:
    start = time.monotonic()
    result = cli(
        server, "submit", "hello", "-i", "name=Ada", "--in", "1h", "--wait", "--timeout", "1"
    )
    assert result.returncode == ExitCode.TIMEOUT == 5, describe(result)
    assert "still SCHEDULED" in result.stderr and "Traceback" not in result.stderr
    assert time.monotonic() - start < 30


def test_a_usage_error_and_an_api_error_keep_their_own_codes(server: ServerProcess) -> None:
    usage = cli(server, "submit", "hello", "--in", "soon")
    assert usage.returncode == ExitCode.USAGE == 2, describe(usage)
    unknown = cli(server, "get", str(uuid.uuid4()))
    assert unknown.returncode == ExitCode.ERROR == 1, describe(unknown)


def test_workflows_run_wait_exits_with_how_the_run_ended(
    server: ServerProcess, broken: str, tmp_path: Path
) -> None:
    diamond = REPO / "examples" / "workflows" / "nightly-report.yaml"
    assert cli(server, "workflows", "apply", str(diamond)).returncode == 0
    good = cli(server, "workflows", "run", "nightly-report", "-i", "day=2026-03-01", "--wait")
    assert good.returncode == 0, describe(good)
    assert "SUCCEEDED" in good.stdout

    path = tmp_path / "broken-flow.yaml"
    path.write_text(yaml.safe_dump(BROKEN_WORKFLOW))
    applied = cli(server, "workflows", "apply", str(path))
    assert applied.returncode == 0, describe(applied)
    bad = cli(server, "workflows", "run", "gate-broken-flow", "--wait", "--json")
    assert bad.returncode == ExitCode.FAILED, describe(bad)
    assert _json(bad)["status"] == "FAILED"


# -- --json after the command ----------------------------------------------------------------------


def test_json_after_the_command_prints_the_same_as_before_it(server: ServerProcess) -> None:
    submitted = cli(server, "submit", "hello", "-i", "name=Ada", "--in", "1h", "--json")
    assert submitted.returncode == 0, describe(submitted)
    execution_id = _json(submitted)["executionId"]
    for args in (
        ["get", execution_id],
        ["attempts", execution_id],
        ["list", "--status", "SCHEDULED", "--limit", "5"],
        ["definitions", "list"],
        ["cron", "list"],
        ["cron", "preview", "0 2 * * *", "--count", "2", "--from", "2026-03-01T00:00:00Z"],
    ):
        after = cli(server, *args, "--json")
        assert after.returncode == 0, describe(after)
        before = cli(server, "--json", *args)
        assert before.returncode == 0, describe(before)
        assert _json(after) == _json(before), args
    assert _json(cli(server, "get", execution_id, "--json"))["executionId"] == execution_id


def test_every_command_that_prints_data_takes_json() -> None:
    """A new command that prints data must take ``--json`` after its name too."""
    prints_nothing_to_parse = {
        "server",
        "worker",
        "scheduler",
        "orchestrator",
        "prune",
        "db upgrade",
        "db partitions enable",
        "db partitions ensure",
        "db partitions drop",
        "keys create",
        "keys revoke",
        "definitions apply",
        "workflows apply",
        "cron run",
    }
    missing = []
    for path, command in _leaves(typer.main.get_command(app), ()):
        name = " ".join(path)
        if name in prints_nothing_to_parse:
            continue
        if not any("--json" in p.opts for p in command.params):
            missing.append(name)
    assert missing == []


def _leaves(command: Any, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
    sub = getattr(command, "commands", None)
    if not sub:
        return [(path, command)]
    return [leaf for name, c in sub.items() for leaf in _leaves(c, (*path, name))]


def test_no_key_anywhere_says_so(server: ServerProcess, tmp_path: Path) -> None:
    """No --api-key, no TICKWHEEL_API_KEY, no key file where it runs: the error says what to
    set, not only that the server refused."""
    result = run_cli("list", cwd=tmp_path, server=server, api_key="")
    assert result.returncode == ExitCode.ERROR, describe(result)
    assert "none was given" in result.stderr and "TICKWHEEL_API_KEY" in result.stderr
