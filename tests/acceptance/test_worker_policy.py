"""The run policy through real processes: ``tickwheel server`` runs a command example only when
its flags enable it, refuses it for good otherwise, and refuses to start with a secrets file
that others may read."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx

from tests.acceptance.conftest import TICKWHEEL, ServerProcess, clean_env, start_server, wait_on_api

FINISHED = ("SUCCEEDED", "FAILED")


def run_report(server: ServerProcess) -> Any:
    body = {"definitionUri": "registry://jobs/report", "inputs": {"report_date": "2026-12-01"}}
    r = httpx.post(f"{server.url}/v1/executions", json=body, headers=server.headers(), timeout=10)
    assert r.status_code == 201, r.text
    path = f"/v1/executions/{r.json()['executionId']}"
    return wait_on_api(server, path, lambda e: e["status"] in FINISHED)


def test_commands_run_only_on_a_server_that_enables_them(tmp_path: Path) -> None:
    server = start_server(tmp_path / "default")
    try:
        refused = run_report(server)
    finally:
        server.stop()
    assert refused["status"] == "FAILED" and refused["attemptCount"] == 1, refused
    assert refused["error"]["kind"] == "permanent"
    assert "TICKWHEEL_COMMANDS" in refused["error"]["message"]

    server = start_server(tmp_path / "enabled", "--command", "python3")
    try:
        ran = run_report(server)
    finally:
        server.stop()
    assert ran["status"] == "SUCCEEDED" and ran["output"] == {"rows": 0}, ran


def test_a_secrets_file_others_may_read_stops_the_start(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    secrets.write_text("HOOK_TOKEN=abc\n")
    secrets.chmod(0o644)
    result = subprocess.run(
        [str(TICKWHEEL), "worker", "--secrets-file", str(secrets)],
        cwd=tmp_path,
        env=clean_env(TICKWHEEL_DATABASE_URL=f"sqlite:///{tmp_path / 'w.db'}"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "chmod 600" in result.stderr and "abc" not in result.stderr + result.stdout
