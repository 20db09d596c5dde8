"""A private PostgreSQL cluster for tests that must stop, restart or break the database.

The shared server on 5432 belongs to everyone running tests; a test that takes a database away
makes its own with ``initdb`` and ``pg_ctl`` in a temporary directory, on a free loopback port,
and stops it itself. PostgreSQL refuses to run as root, so as root the commands run as the
``postgres`` user. Without the binaries the test is skipped with the reason, except under
``CI=true``, where that is a failure (CI must exercise outages)."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from tests.conftest import IN_CI

START_TIMEOUT = 30


def _bindir() -> Path | None:
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    found = shutil.which("pg_ctl")
    return Path(found).parent if found and shutil.which("initdb") else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PrivateCluster:
    """One cluster: ``start``, ``stop`` (fast shutdown: sessions are terminated, as in a restart),
    ``terminate_sessions`` and ``url``. ``destroy`` stops it and removes its files."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="tw-private-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as: list[str] = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            [*self._as, str(self.bindir / tool), *args],
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT + 10,
            check=False,
        )
        if done.returncode != 0:
            log = self.log.read_text(errors="replace") if self.log.exists() else ""
            raise RuntimeError(f"{tool} {' '.join(args)} failed:\n{done.stderr}\n{log}")

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root}"
            " -c fsync=off -c full_page_writes=off -c max_connections=40"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options,
            "-w", "-t", str(START_TIMEOUT), "start",
        )  # fmt: skip

    def stop(self) -> None:
        """A fast shutdown: every session gets a FATAL and is closed, like a database restart."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def terminate_sessions(self, database: str = "postgres") -> int:
        """Terminates every client session of ``database`` but this one, waiting (up to 5 s
        each) until each is gone; returns how many there were."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = %s"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
                (database,),
            ).fetchall()
        assert all(row[0] for row in rows), rows
        return len(rows)

    def destroy(self) -> None:
        try:
            if self.running():
                self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def private_cluster() -> Iterator[PrivateCluster]:
    """A started private cluster, destroyed afterwards; skips (fails under ``CI=true``) when it
    cannot be made here."""
    bindir = _bindir()
    reason = None
    if bindir is None:
        reason = "PostgreSQL server binaries (initdb, pg_ctl) not found"
    elif os.geteuid() == 0 and not _has_user("postgres"):
        reason = "running as root, and there is no postgres user to run PostgreSQL as"
    if reason or bindir is None:
        if IN_CI:
            pytest.fail(f"CI=true requires a private PostgreSQL cluster: {reason}")
        pytest.skip(f"no private PostgreSQL cluster: {reason}")
    cluster = PrivateCluster(bindir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
