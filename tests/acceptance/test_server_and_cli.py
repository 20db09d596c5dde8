"""The README tour, for real: ``tickwheel server`` as a process and the CLI as further processes
(plus plain HTTP, as with curl). One server serves the module; tests that restart or reconfigure
a server start their own in their own directory."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.acceptance.conftest import (
    EXAMPLE_NAMES,
    EXAMPLES,
    TICKWHEEL,
    ServerProcess,
    clean_env,
    describe,
    flat,
    free_port,
    run_cli,
    start_server,
)


def cli_json(server: ServerProcess, *args: str, **kw: Any) -> Any:
    result = run_cli(*args, cwd=server.directory, server=server, as_json=True, **kw)
    assert result.returncode == 0, describe(result)
    return json.loads(result.stdout)


def cli_ok(server: ServerProcess, *args: str, **kw: Any) -> str:
    result = run_cli(*args, cwd=server.directory, server=server, **kw)
    assert result.returncode == 0, describe(result)
    assert not result.stderr.strip(), describe(result)
    return result.stdout


def in_minutes(minutes: float, offset_hours: int = 0) -> str:
    at = datetime.now(UTC) + timedelta(minutes=minutes)
    return at.astimezone(timezone(timedelta(hours=offset_hours))).isoformat()


# -- first start ----------------------------------------------------------------------------------


def test_first_start_creates_one_private_admin_key_and_the_database_in_cwd(
    server: ServerProcess,
) -> None:
    key_file = server.directory / "tickwheel.admin-key"
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert server.admin_key and server.admin_key.startswith("tw_")
    assert server.stdout.count(server.admin_key) == 1
    assert server.admin_key not in server.stderr
    assert (server.directory / "tickwheel.db").is_file()
    ready = httpx.get(f"{server.url}/readyz", timeout=5)
    assert ready.status_code == 200, ready.text
    assert ready.json()["status"] == "ok" and ready.json()["database"] == "sqlite"


# -- definitions ----------------------------------------------------------------------------------


def test_definitions_list_shows_the_examples(server: ServerProcess) -> None:
    table = cli_ok(server, "definitions", "list")
    for name in EXAMPLE_NAMES:
        assert f"registry://jobs/{name}" in table
    items = cli_json(server, "definitions", "list")
    assert {d["name"] for d in items} >= EXAMPLE_NAMES
    hello = next(d for d in items if d["name"] == "hello")
    assert hello["uri"] == "registry://jobs/hello" and hello["version"] == 1
    assert hello["execution"]["type"] == "python"


def test_applying_an_example_again_says_unchanged(server: ServerProcess) -> None:
    """The examples are shared (``--definitions``, the operator's act), and the first key is an
    operator key: publishing one again is a no-op; into the tenant, its name is refused."""
    out = cli_ok(server, "definitions", "apply", "--shared", str(EXAMPLES / "hello.yaml"))
    assert "unchanged" in out and "registry://jobs/hello" in out and "(shared)" in out
    assert "registered" not in out
    refused = run_cli(
        "definitions", "apply", str(EXAMPLES / "hello.yaml"), cwd=server.directory, server=server
    )
    assert refused.returncode == 1, describe(refused)
    assert "hello is a shared definition; choose another name" in flat(refused.stderr)
    assert "Traceback" not in refused.stderr
    keys = run_cli(
        "keys",
        "list",
        "--database-url",
        f"sqlite:///{server.directory / 'tickwheel.db'}",
        cwd=server.directory,
    )
    assert keys.returncode == 0 and "operator" in keys.stdout, describe(keys)


# -- executions -----------------------------------------------------------------------------------


def test_submit_get_list_and_cancel_like_the_tour(server: ServerProcess) -> None:
    before = datetime.now(UTC)
    submitted = cli_json(
        server, "submit", "hello", "-i", "name=Ada", "--in", "5m", "--key", "tour-1"
    )
    after = datetime.now(UTC)
    execution_id = submitted["executionId"]
    assert submitted["status"] == "SCHEDULED"
    assert submitted["inputs"] == {"name": "Ada", "times": 1}
    assert submitted["idempotencyKey"] == "tour-1"
    assert submitted["definitionUri"] == "registry://jobs/hello"
    execute_at = datetime.fromisoformat(submitted["executeAt"])
    assert before + timedelta(minutes=5) - timedelta(seconds=1) <= execute_at
    assert execute_at <= after + timedelta(minutes=5) + timedelta(seconds=1)

    shown = cli_ok(server, "get", execution_id)
    assert execution_id in shown and "SCHEDULED" in shown and "tour-1" in shown
    assert "registry://jobs/hello v1" in shown

    table = cli_ok(server, "list", "--status", "SCHEDULED")
    assert execution_id in table
    page = cli_json(server, "list", "--status", "SCHEDULED")
    assert execution_id in {e["executionId"] for e in page["items"]}
    assert {e["status"] for e in page["items"]} == {"SCHEDULED"}

    cancelled = cli_ok(server, "cancel", execution_id)
    assert "CANCELLED" in cancelled
    again = run_cli("cancel", execution_id, cwd=server.directory, server=server)
    assert again.returncode != 0, describe(again)
    assert "CANCELLED" in again.stderr and "Traceback" not in again.stderr

    # Without --api-key, run where the server wrote its key file, the CLI finds the key itself.
    found = run_cli("--json", "get", execution_id, cwd=server.directory, server=server, api_key="")
    assert found.returncode == 0, describe(found)
    assert json.loads(found.stdout)["status"] == "CANCELLED"


def test_submit_and_wait_until_it_ran(server: ServerProcess) -> None:
    done = cli_json(server, "submit", "add", "-i", "a=2", "-i", "b=40", "--wait", "--timeout", "20")
    assert done["status"] == "SUCCEEDED", done
    assert done["output"] == {"sum": 42}


def test_invalid_inputs_exit_2_naming_the_field_and_create_nothing(server: ServerProcess) -> None:
    result = run_cli(
        "submit", "hello", "-i", "name=5", "--key", "bad-1", cwd=server.directory, server=server
    )
    assert result.returncode == 2, describe(result)
    assert "inputs.name" in result.stderr
    assert "Traceback" not in result.stderr
    assert cli_json(server, "list", "--key", "bad-1")["items"] == []


def test_cli_says_when_the_server_cannot_be_reached(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = run_cli("--url", url, "--api-key", "tw_x_y", "list", cwd=tmp_path)
    assert result.returncode == 1, describe(result)
    assert "cannot reach" in result.stderr and "Traceback" not in result.stderr


# -- plain HTTP -----------------------------------------------------------------------------------


def test_submit_over_plain_http_is_idempotent(server: ServerProcess) -> None:
    execute_at = in_minutes(10, offset_hours=2)
    assert execute_at.endswith("+02:00")
    body = {
        "definitionUri": "registry://jobs/hello",
        "inputs": {"name": "Grace", "times": 2},
        "executeAt": execute_at,
    }
    headers = {**server.headers(), "Idempotency-Key": f"curl-{uuid.uuid4()}"}
    with httpx.Client(base_url=server.url, timeout=10) as http:
        first = http.post("/v1/executions", json=body, headers=headers)
        assert first.status_code == 201, first.text
        created = first.json()
        assert created["status"] == "SCHEDULED"
        assert created["executeAt"].endswith("Z")
        assert datetime.fromisoformat(created["executeAt"]) == datetime.fromisoformat(execute_at)
        again = http.post("/v1/executions", json=body, headers=headers)
        assert again.status_code == 200, again.text
        assert again.json()["executionId"] == created["executionId"]
        same_key = http.get(
            "/v1/executions",
            params={"idempotencyKey": headers["Idempotency-Key"]},
            headers=server.headers(),
        )
        assert [e["executionId"] for e in same_key.json()["items"]] == [created["executionId"]]


def test_without_a_key_the_api_answers_401_in_json(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as http:
        for response in (
            http.get("/v1/executions"),
            http.post("/v1/executions", json={"definitionUri": "registry://jobs/hello"}),
            http.get("/v1/executions", headers={"Authorization": "Bearer tw_nope_nope"}),
        ):
            assert response.status_code == 401, response.text
            assert response.headers["content-type"].startswith("application/json")
            assert response.headers.get("www-authenticate") == "Bearer"
            error = response.json()["error"]
            assert error["code"] == "unauthorized" and error["message"]
        assert http.get("/healthz").status_code == 200


def test_a_read_key_of_another_tenant_reads_only_its_own_and_cannot_submit(
    server: ServerProcess,
) -> None:
    mine = cli_json(server, "submit", "hello", "-i", "name=Ada", "--in", "1h")["executionId"]
    created = run_cli(
        "keys",
        "create",
        "--tenant",
        "globex",
        "--scope",
        "read",
        "--database-url",
        f"sqlite:///{server.directory / 'tickwheel.db'}",
        cwd=server.directory,
    )
    assert created.returncode == 0, describe(created)
    globex = created.stdout.strip().splitlines()[-1].strip()
    assert globex.startswith("tw_") and globex != server.admin_key
    assert created.stdout.count(globex) == 1

    with httpx.Client(base_url=server.url, headers=server.headers(globex), timeout=10) as http:
        listed = http.get("/v1/executions", params={"limit": 500})
        assert listed.status_code == 200, listed.text
        assert listed.json()["items"] == []
        hidden = http.get(f"/v1/executions/{mine}")
        assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "not_found"
        refused = http.post(
            "/v1/executions",
            json={"definitionUri": "registry://jobs/hello", "inputs": {"name": "Eve"}},
        )
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == "forbidden"
        assert http.delete(f"/v1/executions/{mine}").status_code == 403

    denied = run_cli(
        "submit", "hello", "-i", "name=Eve", cwd=server.directory, server=server, api_key=globex
    )
    assert denied.returncode == 1, describe(denied)
    assert "read" in denied.stderr and "Traceback" not in denied.stderr
    # The default tenant's execution is untouched.
    assert cli_json(server, "get", mine)["status"] == "SCHEDULED"


# -- restarts and flags ---------------------------------------------------------------------------


def test_restart_keeps_the_data_and_makes_no_second_admin_key(tmp_path: Path) -> None:
    first = start_server(tmp_path)
    try:
        key = first.admin_key
        assert key is not None
        submitted = cli_json(
            first, "submit", "hello", "-i", "name=Ada", "--in", "1h", "--key", "r-1"
        )
    finally:
        first.stop()
    # uvicorn re-raises SIGTERM after its graceful shutdown, so -15 is a normal end here.
    assert first.returncode in (0, -signal.SIGTERM) and not first.killed, first.output()
    assert "Finished server process" in first.stderr + first.stdout

    second = start_server(tmp_path, first_start=False)
    try:
        assert second.admin_key == key
        assert "First start" not in second.stdout and key not in second.stdout
        assert oct((tmp_path / "tickwheel.admin-key").stat().st_mode & 0o777) == "0o600"
        got = cli_json(second, "get", submitted["executionId"])
        assert got["status"] == "SCHEDULED" and got["idempotencyKey"] == "r-1"
        keys = run_cli(
            "keys", "list", "--database-url", f"sqlite:///{tmp_path / 'tickwheel.db'}", cwd=tmp_path
        )
        assert keys.returncode == 0, describe(keys)
        # One key, an operator key (whoever starts the server runs the cluster).
        assert keys.stdout.count("first operator key") == 1, describe(keys)
        assert keys.stdout.count("operator") == 2, describe(keys)  # the scope and the name
    finally:
        second.stop()


def test_insecure_no_auth_is_refused_beyond_loopback(tmp_path: Path) -> None:
    started = time.monotonic()
    result = subprocess.run(
        [
            str(TICKWHEEL),
            "server",
            "--host",
            "0.0.0.0",
            "--port",
            str(free_port()),
            "--insecure-no-auth",
        ],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=20,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode != 0, describe(result)
    assert time.monotonic() - started < 15
    assert "loopback" in flat(result.stderr), describe(result)
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "tickwheel.admin-key").exists()


def test_insecure_no_auth_on_loopback_serves_without_a_key_and_warns(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--insecure-no-auth", first_start=None)
    try:
        assert "WARNING" in server.stderr + server.stdout
        with httpx.Client(base_url=server.url, timeout=10) as http:
            submitted = http.post(
                "/v1/executions",
                json={"definitionUri": "registry://jobs/hello", "inputs": {"name": "Ada"}},
            )
            assert submitted.status_code == 201, submitted.text
            listed = http.get("/v1/executions")
            assert listed.status_code == 200
            assert [e["executionId"] for e in listed.json()["items"]] == [
                submitted.json()["executionId"]
            ]
    finally:
        server.stop()


# -- PostgreSQL -----------------------------------------------------------------------------------


@pytest.mark.postgres
def test_server_on_postgres_waits_for_db_upgrade(fresh_pg_database: str, tmp_path: Path) -> None:
    url = fresh_pg_database
    refused = subprocess.run(
        [str(TICKWHEEL), "server", "--port", str(free_port()), "--database-url", url],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert refused.returncode != 0, describe(refused)
    assert "tickwheel db upgrade" in flat(refused.stderr), describe(refused)
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "tickwheel.admin-key").exists()

    upgraded = run_cli("db", "upgrade", "--database-url", url, cwd=tmp_path)
    assert upgraded.returncode == 0, describe(upgraded)
    assert "applied" in upgraded.stdout
    again = run_cli("db", "upgrade", "--database-url", url, cwd=tmp_path)
    assert again.returncode == 0 and "up to date" in again.stdout, describe(again)

    server = start_server(tmp_path, "--database-url", url)
    try:
        ready = httpx.get(f"{server.url}/readyz", timeout=5).json()
        assert ready["status"] == "ok" and ready["database"] == "postgresql"
        submitted = cli_json(
            server, "submit", "hello", "-i", "name=Ada", "--in", "5m", "--key", "pg-1"
        )
        assert submitted["status"] == "SCHEDULED"
        assert cli_json(server, "get", submitted["executionId"])["idempotencyKey"] == "pg-1"
    finally:
        server.stop()
    assert not (tmp_path / "tickwheel.db").exists()


def test_sigterm_closes_the_store_before_exiting(tmp_path: Path) -> None:
    server = start_server(tmp_path, definitions=True)
    server.stop()
    assert not server.killed, server.output()
    assert not (tmp_path / "tickwheel.db-wal").exists(), "the SQLite store was never closed"


def test_keys_list_on_a_database_without_the_schema_explains_instead_of_crashing(
    tmp_path: Path,
) -> None:
    result = run_cli(
        "keys", "list", "--database-url", f"sqlite:///{tmp_path / 'typo.db'}", cwd=tmp_path
    )
    assert result.returncode != 0, describe(result)
    assert "Traceback" not in result.stderr, describe(result)


@pytest.mark.postgres
def test_keys_create_on_postgres_with_pending_migrations_names_db_upgrade(
    fresh_pg_database: str, tmp_path: Path
) -> None:
    result = run_cli(
        "keys", "create", "--tenant", "globex", "--database-url", fresh_pg_database, cwd=tmp_path
    )
    assert result.returncode != 0, describe(result)
    assert "Traceback" not in result.stderr, describe(result)
    assert "tickwheel db upgrade" in flat(result.stderr + result.stdout), describe(result)
