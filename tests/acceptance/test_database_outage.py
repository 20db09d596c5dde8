"""A database outage under a real ``tickwheel server --no-engine``: the API answers honestly.

The server runs against a private PostgreSQL cluster (``tests/private_pg.py``) that the test
breaks on purpose: first every session of the server is terminated (``pg_terminate_backend``),
then the cluster is stopped and started again. While the database is gone every request is a
503 with ``Retry-After`` and the JSON error body, never a 500; ``/readyz`` says not ready; and
once the database is back the same server process answers 2xx again (its pool threw away the
dead connections and reconnected) without a restart."""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.acceptance.conftest import TICKWHEEL, ServerProcess, clean_env, start_server
from tests.private_pg import PrivateCluster, private_cluster

RECOVERY_TIMEOUT = 20.0
# Its own PostgreSQL, not the shared one; the label keeps `-m "not postgres"` runs free of it.
pytestmark = pytest.mark.postgres


@pytest.fixture
def cluster() -> Iterator[PrivateCluster]:
    with private_cluster() as made:
        yield made


def role_env(cluster: PrivateCluster) -> dict[str, str]:
    return clean_env(TICKWHEEL_DATABASE_URL=cluster.url, TICKWHEEL_DB_POOL_SIZE="4")


@pytest.fixture
def server(tmp_path: Path, cluster: PrivateCluster) -> Iterator[ServerProcess]:
    env = role_env(cluster)
    upgrade = subprocess.run(
        [str(TICKWHEEL), "db", "upgrade"], env=env, capture_output=True, text=True, timeout=60
    )
    assert upgrade.returncode == 0, upgrade.stderr
    started = start_server(tmp_path, "--no-engine", env=env)
    try:
        yield started
    finally:
        started.stop()


def submit(http: httpx.Client) -> httpx.Response:
    return http.post(
        "/v1/executions",
        json={"definitionUri": "registry://jobs/hello", "inputs": {"name": "Ada"}},
        headers={"Idempotency-Key": f"outage-{uuid.uuid4()}"},
    )


def requests(http: httpx.Client) -> dict[str, httpx.Response]:
    """One read, one write and the readiness probe."""
    return {
        "list": http.get("/v1/executions"),
        "submit": submit(http),
        "readyz": http.get("/readyz"),
    }


def assert_unavailable(name: str, response: httpx.Response) -> None:
    assert response.status_code == 503, f"{name}: {response.status_code} {response.text}"
    if name == "readyz":
        assert response.json()["status"] == "unavailable"
        return
    retry_after = response.headers.get("Retry-After", "")
    assert retry_after.isdigit() and int(retry_after) >= 1, f"{name}: {response.headers}"
    error = response.json()["error"]
    assert error["code"] == "unavailable", error
    assert "retry" in error["message"], error
    assert "127.0.0.1" not in error["message"], "the database's address leaked to the client"


def assert_ok(answers: dict[str, httpx.Response]) -> None:
    for name, response in answers.items():
        assert 200 <= response.status_code < 300, f"{name}: {response.status_code} {response.text}"


def test_an_outage_answers_503_and_the_same_server_recovers(
    server: ServerProcess, cluster: PrivateCluster
) -> None:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=30) as http:
        assert_ok(requests(http))

        # Terminated sessions: the pool must not lend their dead connections (they were a 500
        # each before); it checks them, drops them and connects anew.
        assert cluster.terminate_sessions() >= 1
        for _ in range(3):
            assert_ok(requests(http))

        # The database goes away: every answer is a 503 with Retry-After, and quickly (not after
        # the pool's full 10 s wait for a connection).
        cluster.stop()
        for _ in range(3):
            began = time.monotonic()
            for name, response in requests(http).items():
                assert_unavailable(name, response)
            assert time.monotonic() - began < 6, "requests kept waiting during the outage"

        # Back again: the same process answers 2xx without a restart; on the way every answer
        # is either a 2xx or an honest 503, never a 500.
        cluster.start()
        deadline = time.monotonic() + RECOVERY_TIMEOUT
        while True:
            response = http.get("/v1/executions")
            if response.status_code == 200:
                break
            assert_unavailable("list", response)
            assert time.monotonic() < deadline, "the API did not recover after the database"
            time.sleep(0.2)  # bounded poll for the pool's reconnection
        assert_ok(requests(http))
        created = submit(http)
        assert created.status_code == 201, created.text
        found = http.get(f"/v1/executions/{created.json()['executionId']}")
        assert found.status_code == 200, found.text

    assert server.stop() == 0, server.output()
    assert "unhandled error" not in server.stderr, server.output()


# -- the engine roles -----------------------------------------------------------------------------


@dataclass
class Role:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return f"--- {self.name} ---\n{self.log.read_text(errors='replace')}"

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture
def roles(tmp_path: Path, cluster: PrivateCluster, server: ServerProcess) -> Iterator[list[Role]]:
    """``tickwheel scheduler`` and ``tickwheel worker`` beside the API, on the private cluster."""
    started: list[Role] = []
    for name, args in (("scheduler", []), ("worker", ["--concurrency", "2", "--grace", "2"])):
        log = tmp_path / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(TICKWHEEL), name, *args],
                cwd=tmp_path,
                env=role_env(cluster),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        started.append(Role(name, proc, log))
    try:
        yield started
    finally:
        for role in started:
            role.stop()


def run_to_success(http: httpx.Client, roles: list[Role], within: float) -> None:
    created = submit(http)
    assert created.status_code == 201, created.text
    url = f"/v1/executions/{created.json()['executionId']}"
    deadline = time.monotonic() + within
    status = ""
    while time.monotonic() < deadline:
        response = http.get(url)
        if response.status_code == 200:
            status = response.json()["status"]
            if status == "SUCCEEDED":
                return
            assert status not in ("FAILED", "CANCELLED"), response.text
        else:
            assert_unavailable("get", response)
        time.sleep(0.2)  # bounded poll of a real process's progress
    logs = "\n".join(role.output() for role in roles)
    raise AssertionError(f"not SUCCEEDED within {within} s (last {status})\n{logs}")


def test_the_scheduler_and_worker_carry_on_after_a_database_restart(
    server: ServerProcess, cluster: PrivateCluster, roles: list[Role]
) -> None:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=30) as http:
        run_to_success(http, roles, within=30)
        cluster.stop()
        time.sleep(2)  # the roles meet the outage: their polls and heartbeats fail meanwhile
        cluster.start()
        run_to_success(http, roles, within=45)
    for role in roles:
        assert role.proc.poll() is None, f"{role.name} died\n{role.output()}"
        assert role.stop() == 0, role.output()
