"""Acceptance tests drive real processes: ``tickwheel server`` as a subprocess on a loopback port
and the ``tickwheel`` CLI as further subprocesses, exactly as a person following the README does.

Every server runs in its own temporary directory (its working directory), so the SQLite file and
``tickwheel.admin-key`` land there and nothing leaks into the repository or between tests."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.conftest import PG_ADMIN_URL

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "definitions"
EXAMPLE_NAMES = {"add", "hello", "notify", "report", "thumbnail"}
# A bound on a broken start, not a speed check: CI once saw a healthy server need more than
# 20 s while the machine was busy installing packages beside the suite.
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
CLI_TIMEOUT = 60.0


def _executable() -> Path:
    """The console script of the venv that runs the tests (``.venv/bin/tickwheel`` in the repo)."""
    beside = Path(sys.executable).with_name("tickwheel")
    return beside if beside.exists() else REPO / ".venv" / "bin" / "tickwheel"


TICKWHEEL = _executable()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment without any ``TICKWHEEL_*`` setting (a developer's own
    ``TICKWHEEL_DATABASE_URL`` or key must not leak in), unbuffered and wide enough that Rich
    never wraps or truncates an id."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
    env.update(PYTHONUNBUFFERED="1", COLUMNS="200", NO_COLOR="1", TERM="dumb")
    env.update(extra)
    return env


def flat(text: str) -> str:
    """Whitespace collapsed, so a message Rich happened to wrap still matches."""
    return " ".join(text.split())


class ServerDidNotStart(AssertionError):
    pass


@dataclass
class ServerProcess:
    directory: Path
    port: int
    args: list[str]
    proc: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path
    admin_key: str | None = None
    returncode: int | None = field(default=None)
    killed: bool = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def output(self) -> str:
        return (
            f"$ {' '.join(self.args)}\n--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}"
        )

    def headers(self, key: str | None = None) -> dict[str, str]:
        secret = key or self.admin_key
        assert secret, "this server has no admin key"
        return {"Authorization": f"Bearer {secret}"}

    def stop(self) -> int:
        """SIGTERM, then SIGKILL if it does not finish in time (``killed`` says so). Returns the
        exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.killed = True
                self.proc.kill()
                self.proc.wait()
        self.returncode = self.proc.returncode
        return self.returncode


def _wait_until_healthy(server: ServerProcess) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    with httpx.Client(timeout=1.0) as http:
        while time.monotonic() < deadline:
            if server.proc.poll() is not None:
                raise ServerDidNotStart(
                    f"the server exited with {server.proc.returncode} before answering "
                    f"/healthz\n{server.output()}"
                )
            try:
                if http.get(f"{server.url}/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)  # bounded readiness poll
    server.stop()
    raise ServerDidNotStart(f"/healthz did not answer within {READY_TIMEOUT} s\n{server.output()}")


def _launch(directory: Path, args: list[str], env: dict[str, str]) -> ServerProcess:
    port = free_port()
    full = [str(TICKWHEEL), "server", "--port", str(port), *args]
    n = len(list(directory.glob("server-*.stdout")))
    stdout_path = directory / f"server-{n}.stdout"
    stderr_path = directory / f"server-{n}.stderr"
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        proc = subprocess.Popen(
            full, cwd=directory, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL
        )
    return ServerProcess(directory, port, full, proc, stdout_path, stderr_path)


def start_server(
    directory: Path,
    *args: str,
    definitions: bool = True,
    first_start: bool | None = True,
    env: dict[str, str] | None = None,
) -> ServerProcess:
    """Starts ``tickwheel server`` in ``directory`` and waits for ``/healthz``.

    ``first_start``: True checks that an admin key was made (printed once on stdout, in a 0600
    file), False that none was printed, None checks nothing. The key, if any, is read from the
    file either way."""
    directory.mkdir(parents=True, exist_ok=True)
    extra = [*args, *(["--definitions", str(EXAMPLES)] if definitions else [])]
    for _ in range(3):  # the free port may be taken between probing and binding: try another
        server = _launch(directory, extra, env or clean_env())
        try:
            _wait_until_healthy(server)
            break
        except ServerDidNotStart:
            server.stop()
            if "address already in use" not in server.stderr.lower():
                raise
    else:  # pragma: no cover - three races in a row
        raise ServerDidNotStart(server.output())
    try:
        _check_admin_key(server, first_start)
    except BaseException:
        server.stop()
        raise
    return server


def _check_admin_key(server: ServerProcess, first_start: bool | None) -> None:
    key_file = server.directory / "tickwheel.admin-key"
    if key_file.exists():
        server.admin_key = key_file.read_text().strip()
    if first_start is True:
        assert server.admin_key, f"no admin key file after the first start\n{server.output()}"
        mode = stat.S_IMODE(key_file.stat().st_mode)
        assert mode == 0o600, f"{key_file} has mode {mode:o}, want 600"
        assert server.stdout.count(server.admin_key) == 1, server.output()
    elif first_start is False and server.admin_key:
        assert server.admin_key not in server.stdout, "a restart printed the admin key again"


def run_cli(
    *args: str,
    cwd: Path,
    server: ServerProcess | None = None,
    api_key: str | None = None,
    as_json: bool = False,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``tickwheel [--url ...] [--api-key ...] [--json] <args>``; ``api_key`` defaults to the
    server's admin key (pass ``""`` to send none and let the CLI find the key file)."""
    cmd = [str(TICKWHEEL)]
    if server is not None:
        cmd += ["--url", server.url]
        key = server.admin_key if api_key is None else api_key
        if key:
            cmd += ["--api-key", key]
    elif api_key:
        cmd += ["--api-key", api_key]
    if as_json:
        cmd.append("--json")
    cmd += list(args)
    return subprocess.run(
        cmd,
        cwd=cwd,
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def describe(result: subprocess.CompletedProcess[str]) -> str:
    return (
        f"$ {' '.join(map(str, result.args))}\nexit {result.returncode}\n"
        f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
    )


def wait_on_api(
    server: ServerProcess,
    path: str,
    done: Callable[[Any], bool],
    timeout: float = 30.0,
    **params: str | int,
) -> Any:
    """GETs ``path`` of the server's API every 0.2 s until ``done(body)`` holds or ``timeout``
    seconds pass; returns the last body. For waiting only: a CLI start per poll costs a second
    or more, so a test waits here and then asserts on what its CLI command shows."""
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=5.0) as http:
        while True:
            response = http.get(path, params=params)
            assert response.status_code == 200, response.text
            body = response.json()
            if done(body) or time.monotonic() > deadline:
                return body
            time.sleep(0.2)  # bounded poll of a real server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One all-in-one server on SQLite per test module, with the example definitions."""
    proc = start_server(tmp_path_factory.mktemp("server"))
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def fresh_pg_database(pg_url: str) -> Iterator[str]:
    """An empty PostgreSQL database (no migrations applied) for one test, dropped after.
    Depends on ``pg_url`` for its skip-or-fail rule when PostgreSQL is unreachable."""
    name = f"tickwheel_accept_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
