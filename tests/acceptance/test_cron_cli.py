"""Issue 4's "done": from the CLI, create ``0 2 * * *`` in Europe/Berlin, see its next fire times
across a DST change, and watch occurrences become executions, against a real ``tickwheel
server`` process (which runs the Cron Service in-process)."""

from __future__ import annotations

import json
from typing import Any

from tests.acceptance.conftest import REPO, ServerProcess, describe, flat, run_cli, wait_on_api

WORKFLOW = REPO / "examples" / "workflows" / "nightly-report.yaml"


def cli(server: ServerProcess, *args: str, as_json: bool = True, code: int = 0) -> Any:
    result = run_cli(*args, cwd=server.directory, server=server, as_json=as_json)
    assert result.returncode == code, describe(result)
    return json.loads(result.stdout) if as_json and code == 0 else result


def test_nightly_in_berlin_from_the_cli(server: ServerProcess) -> None:
    job = cli(
        server, "cron", "create", "nightly", "-d", "hello", "-e", "0 2 * * *",
        "-z", "Europe/Berlin", "-i", "name=Ada",
    )  # fmt: skip
    assert job["status"] == "ACTIVE" and job["definitionVersionPolicy"] == "latest"
    assert len(job["nextFireTimes"]) == 5
    assert all(f["local"].endswith(("+01:00", "+02:00")) for f in job["nextFireTimes"])
    # Across the spring change: 29 March has no 02:00; it fires at 03:00 CEST instead.
    fires = cli(
        server, "cron", "preview", "0 2 * * *", "-z", "Europe/Berlin",
        "--from", "2026-03-27T12:00:00Z", "--count", "4",
    )  # fmt: skip
    assert [f["at"] for f in fires] == [
        "2026-03-28T01:00:00+00:00",
        "2026-03-29T01:00:00+00:00",
        "2026-03-30T00:00:00+00:00",
        "2026-03-31T00:00:00+00:00",
    ]
    assert fires[1]["dst"] == "shifted" and "does not exist" in fires[1]["reason"]
    table = cli(server, "cron", "get", "nightly", as_json=False)
    assert "next fire times" in table.stdout and "Europe/Berlin" in table.stdout
    changed = cli(server, "cron", "update", "nightly", "--jitter", "30", "--version", "1")
    assert changed["jitter"] == 30 and changed["version"] == 2
    stale = cli(server, "cron", "update", "nightly", "--jitter", "5", "--version", "1",
                as_json=False, code=1)  # fmt: skip
    assert "version 2" in flat(stale.stderr)
    assert cli(server, "cron", "pause", "nightly")["status"] == "PAUSED"
    assert cli(server, "cron", "resume", "nightly", "--no-catch-up")["status"] == "ACTIVE"
    names = [j["name"] for j in cli(server, "cron", "list")["items"]]
    assert "nightly" in names


def test_bad_input_is_explained_and_stores_nothing(server: ServerProcess) -> None:
    bad = cli(
        server, "cron", "create", "typo", "-d", "hello", "-e", "0 2 * * *",
        "-z", "Europe/Berln", "-i", "name=Ada", as_json=False, code=2,
    )  # fmt: skip
    assert "did you mean 'Europe/Berlin'" in flat(bad.stderr)
    worse = cli(server, "cron", "preview", "0 24 * * *", as_json=False, code=2)
    assert "field 2 (hour): 24 is out of range 0-23" in flat(worse.stderr)
    assert "typo" not in [j["name"] for j in cli(server, "cron", "list")["items"]]


def test_occurrences_become_executions(server: ServerProcess) -> None:
    job = cli(
        server, "cron", "create", "every-second", "-d", "hello", "-e", "* * * * * *",
        "-i", "name=Cron",
    )  # fmt: skip
    # A bounded wait on a real clock (the server's worker runs them), then what the CLI shows.
    wait_on_api(
        server,
        "/v1/cron-jobs/every-second/executions",
        lambda page: sum(h["executionStatus"] == "SUCCEEDED" for h in page["items"]) >= 3,
        limit=200,
    )
    history = cli(server, "cron", "history", "every-second", "--limit", "200")["items"]
    succeeded = [h for h in history if h["executionStatus"] == "SUCCEEDED"]
    assert len(succeeded) >= 3, history
    cli(server, "cron", "pause", "every-second")
    executions = cli(server, "list", "--limit", "500")["items"]
    keys = [e["idempotencyKey"] for e in executions if e["idempotencyKey"]]
    mine = [k for k in keys if k.startswith(f"cron:{job['cronJobId']}:")]
    assert len(mine) == len(set(mine)) > 3  # one execution per occurrence
    for h in succeeded:
        assert f"cron:{job['cronJobId']}:{h['occurrence'].replace('+00:00', 'Z')}" in mine
    table = cli(server, "cron", "history", "every-second", "--limit", "200", as_json=False)
    assert "SUBMITTED" in table.stdout and "SUCCEEDED" in table.stdout


def test_apply_a_file_with_a_plan_and_prune(server: ServerProcess) -> None:
    path = server.directory / "cron.yaml"
    path.write_text(
        "cronJobs:\n"
        "  - {name: file-a, definitionUri: hello, expression: '@daily', inputs: {name: A}}\n"
        "  - {name: file-b, definitionUri: hello, expression: '@hourly', inputs: {name: B}}\n"
    )
    dry = cli(server, "cron", "apply", str(path), "--dry-run")
    assert [(p["action"], p["name"]) for p in dry["plan"]] == [
        ("create", "file-a"),
        ("create", "file-b"),
    ]
    shown = cli(server, "cron", "apply", str(path), as_json=False)
    assert "applied: 2 to create" in flat(shown.stdout)
    path.write_text(
        "- {name: file-a, definitionUri: hello, expression: '@daily', inputs: {name: A2}}\n"
    )
    pruned = cli(server, "cron", "apply", str(path), "--prune", "--dry-run")
    delete = [p["name"] for p in pruned["plan"] if p["action"] == "delete"]
    assert "file-b" in delete
    pruned = cli(server, "cron", "apply", str(path), "--prune")
    assert ("update", "file-a", ["inputs"]) in [
        (p["action"], p["name"], p["changes"]) for p in pruned["plan"]
    ]
    names = [j["name"] for j in cli(server, "cron", "list")["items"]]
    assert "file-a" in names and "file-b" not in names
    deleted = cli(server, "cron", "delete", "file-a", as_json=False)
    assert "deleted file-a" in deleted.stdout


def test_a_cron_job_that_starts_workflow_runs(server: ServerProcess) -> None:
    """Declared in a file (planned with --dry-run, then applied), shown as a workflow job, and
    each occurrence starts one run of the README's diamond, linked from the history."""
    cli(server, "workflows", "apply", str(WORKFLOW), as_json=False)
    path = server.directory / "cron-wf.yaml"
    path.write_text(
        "cronJobs:\n"
        "  - name: wf-report\n"
        "    workflow: {name: nightly-report}\n"
        "    expression: '* * * * * *'\n"
        "    overlapPolicy: forbid\n"
        "    inputs: {day: '2026-03-01'}\n"
    )
    dry = cli(server, "cron", "apply", str(path), "--dry-run")
    assert [(p["action"], p["name"]) for p in dry["plan"]] == [("create", "wf-report")]
    assert "wf-report" not in [j["name"] for j in cli(server, "cron", "list")["items"]]
    cli(server, "cron", "apply", str(path))
    job = cli(server, "cron", "get", "wf-report")
    assert job["target"] == "workflow" and job["workflow"]["name"] == "nightly-report"
    shown = cli(server, "cron", "get", "wf-report", as_json=False)
    assert "nightly-report (latest)" in flat(shown.stdout)
    listed = cli(server, "cron", "list", as_json=False)
    assert "workflow nightly-report" in flat(listed.stdout)
    # A bounded wait on a real clock (the server's orchestrator and worker), then the CLI's view.
    wait_on_api(
        server,
        "/v1/cron-jobs/wf-report/executions",
        lambda page: any(h["workflowRunStatus"] == "SUCCEEDED" for h in page["items"]),
        limit=200,
    )
    history = cli(server, "cron", "history", "wf-report", "--limit", "200")["items"]
    done = [h for h in history if h["workflowRunStatus"] == "SUCCEEDED"]
    assert done, history
    cli(server, "cron", "pause", "wf-report")
    run = cli(server, "workflows", "get", done[0]["workflowRunId"])
    occurrence = done[0]["occurrence"].replace("+00:00", "Z")
    assert run["idempotencyKey"] == f"cron-wf:{job['cronJobId']}:{occurrence}"
    assert [t["status"] for t in run["tasks"]] == ["SUCCEEDED"] * 4
    started = [h for h in history if h["workflowRunId"]]
    assert len({h["workflowRunId"] for h in started}) == len(started)  # one run per occurrence
    table = cli(server, "cron", "history", "wf-report", "--limit", "5", as_json=False)
    assert "run " in table.stdout
    bad = cli(
        server, "cron", "create", "wf-bad", "-w", "nightly-report", "-d", "hello",
        "-e", "@daily", as_json=False, code=2,
    )  # fmt: skip
    assert "not both" in flat(bad.stderr)
