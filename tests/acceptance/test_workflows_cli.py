"""Issue 7's "done": the README's workflow example, from the CLI, against a real ``tickwheel
server`` process (which runs the orchestrator in-process) with the example definitions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.acceptance.conftest import REPO, ServerProcess, describe, flat, run_cli, wait_on_api

WORKFLOW = REPO / "examples" / "workflows" / "nightly-report.yaml"


def cli(server: ServerProcess, *args: str, as_json: bool = True, code: int = 0) -> Any:
    result = run_cli(*args, cwd=server.directory, server=server, as_json=as_json)
    assert result.returncode == code, describe(result)
    return json.loads(result.stdout) if as_json and code == 0 else result


def test_the_readme_diamond_runs_from_the_cli(server: ServerProcess) -> None:
    applied = cli(server, "workflows", "apply", str(WORKFLOW), as_json=False)
    assert "registered workflow nightly-report version 1" in applied.stdout
    again = cli(server, "workflows", "apply", str(WORKFLOW), as_json=False)
    assert "unchanged" in again.stdout
    run = cli(server, "workflows", "run", "nightly-report", "-i", "day=2026-03-01", "-k", "r1")
    run_id = run["workflowRunId"]
    if run["status"] == "RUNNING":
        wait_on_api(server, f"/v1/workflow-runs/{run_id}", lambda r: r["status"] != "RUNNING")
        run = cli(server, "workflows", "get", run_id)
    assert run["status"] == "SUCCEEDED", run
    publish = run["tasks"][-1]
    assert publish["name"] == "publish"
    assert publish["output"] == {
        "message": "published file:///tmp/clean-3.json and file:///tmp/stats-3.json"
    }
    table = cli(server, "workflows", "get", run_id, as_json=False)
    assert "SUCCEEDED" in table.stdout and "extract" in table.stdout
    bad = cli(server, "workflows", "run", "nightly-report", "-i", "day=soon", code=2, as_json=False)
    assert "inputs.day" in bad.stderr


def test_the_operator_publishes_a_shared_workflow_from_the_cli(
    server: ServerProcess, tmp_path: Path
) -> None:
    """The server's first key is an operator key: ``--shared`` publishes; the same name into the
    tenant is then refused, with the reason and without a traceback."""
    path = tmp_path / "shared-report.yaml"
    path.write_text(WORKFLOW.read_text().replace("name: nightly-report", "name: shared-report"))
    applied = cli(server, "workflows", "apply", "--shared", str(path), as_json=False)
    assert "registered workflow shared-report version 1 (shared)" in applied.stdout
    refused = cli(server, "workflows", "apply", str(path), as_json=False, code=1)
    assert "shared-report is a shared workflow; choose another name" in flat(refused.stderr)
    assert "Traceback" not in refused.stderr
    listed = cli(server, "workflows", "list")
    assert {(w["name"], w["shared"]) for w in listed} >= {("shared-report", True)}
