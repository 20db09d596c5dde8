"""Helpers of the benchmarks: child processes that are always cleaned up, throw-away databases
(a SQLite file, a fresh PostgreSQL database), the SQL the benchmarks read their figures with,
percentiles and a description of the machine.

Nothing here imports tickwheel: the benchmarks drive it from outside, through its console
script, its HTTP API and its tables, the way an operator would."""

from __future__ import annotations

import compileall
import contextlib
import functools
import math
import os
import platform
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import psycopg

REPO = Path(__file__).resolve().parents[1]


@functools.cache
def compile_sources() -> None:
    """Byte-compiles tickwheel's sources and the benchmarks' job modules once per run. The peers
    come from site-packages, compiled by pip when installed; tickwheel runs from the checkout
    (an editable install), where an environment with PYTHONDONTWRITEBYTECODE made every process
    compile ~110 modules at each launch (~0.2 s of CPU, inside a drain's timed start-up). Now it
    starts as a wheel install would."""
    for directory in (REPO / "src", REPO / "bench"):
        compileall.compile_dir(directory, quiet=1)


LOOPBACK = "127.0.0.1"
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


def tickwheel_executable() -> Path:
    """The console script of the venv running this script (``.venv/bin/tickwheel``)."""
    beside = Path(sys.executable).with_name("tickwheel")
    return beside if beside.exists() else REPO / ".venv" / "bin" / "tickwheel"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def child_env(**extra: str) -> dict[str, str]:
    """The caller's environment without any ``TICKWHEEL_*`` setting (a developer's own database
    URL must not leak into a benchmark), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
    env.update(PYTHONUNBUFFERED="1", NO_COLOR="1", TERM="dumb", COLUMNS="200")
    env.update(extra)
    return env


def tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


# -- child processes ----------------------------------------------------------------------------


class ProcessDied(RuntimeError):
    """A child that should be running has exited."""


@dataclass
class Child:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    log_file: IO[bytes]


class Processes:
    """Children started in their own session (a Ctrl-C at the terminal reaches this script
    only, which then stops them in order). ``stop`` ends every child: SIGTERM to its process
    group, then SIGKILL after ``grace`` seconds. It is idempotent and safe in ``finally``."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.children: list[Child] = []
        log_dir.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path) -> Child:
        log = self.log_dir / f"{name}.log"
        log_file = log.open("wb")
        try:
            popen = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except BaseException:
            log_file.close()
            raise
        child = Child(name, popen, log, log_file)
        self.children.append(child)
        return child

    def leaders(self, *, without: Sequence[str] = ()) -> list[int]:
        """Process ids of the children (each leads its own group), but those named ``without``."""
        return [c.popen.pid for c in self.children if c.name not in without]

    def check_alive(self) -> None:
        for child in self.children:
            code = child.popen.poll()
            if code is not None:
                raise ProcessDied(
                    f"{child.name} exited with code {code}; its log ends with:\n{tail(child.log)}"
                )

    def stop(self, children: Sequence[Child] | None = None, grace: float = 20.0) -> None:
        """Stops ``children`` (default: all) and forgets them."""
        with signals_deferred():
            self._stop(list(self.children if children is None else children), grace)

    def _stop(self, targets: list[Child], grace: float) -> None:
        for child in targets:
            _signal_group(child.popen, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for child in targets:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.popen.wait(max(0.0, deadline - time.monotonic()))
            if child.popen.poll() is None:
                _signal_group(child.popen, signal.SIGKILL)
                child.popen.wait()
            child.log_file.close()
            if child in self.children:
                self.children.remove(child)

    def logs(self) -> str:
        return "\n".join(
            f"--- {child.name} ({child.log}) ---\n{tail(child.log)}" for child in self.children
        )


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Cleanup that a second Ctrl-C must not cut short: SIGINT, SIGTERM and SIGHUP are noted
    meanwhile and raised as KeyboardInterrupt once the block is done."""
    received: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous = {
        sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if received:
            raise KeyboardInterrupt(f"signal {received[0]} during cleanup")


def _signal_group(popen: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """The child leads its own process group (``start_new_session``): its id is the group's."""
    if popen.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(popen.pid, sig)


# -- databases ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttemptRow:
    """The first attempt of one execution, times in seconds since the epoch."""

    execute_at: float
    started_at: float
    finished_at: float | None
    worker_id: str


class Database(Protocol):
    backend: str
    url: str

    def counts(self) -> dict[str, int]:
        """Executions by status."""
        ...

    def first_attempts(self) -> list[AttemptRow]: ...

    def attempt_total(self) -> int: ...

    def version(self) -> str: ...


class SqliteDatabase:
    backend = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        # Four slashes: sqlite:/// then the absolute path.
        self.url = f"sqlite:///{path}"
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        # Opened lazily (the file exists once migrated), read-only: the benchmark never writes.
        if self._conn is None:
            self._conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30)
            self._conn.execute("PRAGMA busy_timeout = 30000")
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def counts(self) -> dict[str, int]:
        rows = self._connection().execute("SELECT status, count(*) FROM executions GROUP BY status")
        return {str(status): int(n) for status, n in rows}

    def first_attempts(self) -> list[AttemptRow]:
        rows = self._connection().execute(
            "SELECT e.execute_at, a.started_at, a.finished_at, a.worker_id"
            " FROM attempts a JOIN executions e ON e.execution_id = a.execution_id"
            " WHERE a.attempt_number = 1"
        )
        return [
            AttemptRow(ex / 1e6, st / 1e6, None if fin is None else fin / 1e6, str(worker))
            for ex, st, fin, worker in rows
        ]

    def attempt_total(self) -> int:
        (n,) = self._connection().execute("SELECT count(*) FROM attempts").fetchone()
        return int(n)

    def version(self) -> str:
        return sqlite3.sqlite_version


class PostgresDatabase:
    backend = "postgresql"

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None

    def _connection(self) -> psycopg.Connection[tuple[Any, ...]]:
        if self._conn is None:
            self._conn = psycopg.connect(self.url, autocommit=True)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def counts(self) -> dict[str, int]:
        rows = self._connection().execute("SELECT status, count(*) FROM executions GROUP BY status")
        return {str(status): int(n) for status, n in rows}

    def first_attempts(self) -> list[AttemptRow]:
        rows = self._connection().execute(
            "SELECT extract(epoch FROM e.execute_at)::float8,"
            " extract(epoch FROM a.started_at)::float8,"
            " extract(epoch FROM a.finished_at)::float8, a.worker_id"
            " FROM attempts a JOIN executions e ON e.execution_id = a.execution_id"
            " WHERE a.attempt_number = 1"
        )
        return [
            AttemptRow(float(ex), float(st), None if fin is None else float(fin), str(worker))
            for ex, st, fin, worker in rows
        ]

    def attempt_total(self) -> int:
        row = self._connection().execute("SELECT count(*) FROM attempts").fetchone()
        assert row is not None
        return int(row[0])

    def version(self) -> str:
        row = self._connection().execute("SHOW server_version").fetchone()
        assert row is not None
        return str(row[0])

    def backend_pids(self) -> list[int]:
        """The server processes serving this database's other sessions (the workers')."""
        rows = self._connection().execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return [int(pid) for (pid,) in rows]


@contextlib.contextmanager
def sqlite_database(directory: Path) -> Iterator[SqliteDatabase]:
    """A database file in ``directory`` (removed with the directory by the caller)."""
    db = SqliteDatabase(directory / "bench.db")
    try:
        yield db
    finally:
        db.close()


def require_loopback(url: str) -> None:
    host = urlsplit(url).hostname or ""
    if host not in LOOPBACK_HOSTS:
        raise SystemExit(f"only loopback databases are allowed, not {host or '(no host)'}")


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` instead."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


@contextlib.contextmanager
def postgres_database(server_url: str) -> Iterator[PostgresDatabase]:
    """A fresh database on the server of ``server_url``, dropped afterwards (also after a
    failure or Ctrl-C; connections left open by a killed child are cut by ``FORCE``)."""
    require_loopback(server_url)
    name = f"tickwheel_bench_{uuid.uuid4().hex[:12]}"
    admin_url = with_database(server_url, "postgres")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    db = PostgresDatabase(with_database(server_url, name))
    try:
        yield db
    finally:
        with signals_deferred():
            db.close()
            with psycopg.connect(admin_url, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def postgres_server_info(server_url: str) -> dict[str, str]:
    """Server version and the settings that matter most for write throughput."""
    require_loopback(server_url)
    info: dict[str, str] = {}
    with psycopg.connect(with_database(server_url, "postgres"), autocommit=True) as conn:
        for setting in (
            "server_version",
            "synchronous_commit",
            "fsync",
            "shared_buffers",
            "max_connections",
            "wal_level",
        ):
            row = conn.execute(f"SHOW {setting}").fetchone()
            info[setting] = str(row[0]) if row else "?"
    return info


# -- statistics ---------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100), interpolating linearly between the closest ranks."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


# -- the machine --------------------------------------------------------------------------------

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields[:8])  # guest time is already counted in user
    return total - idle, total


def busy_fraction(before: tuple[int, int], after: tuple[int, int]) -> float:
    """Share of the whole machine (all cores) that was busy between two ``cpu_jiffies``."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else 0.0


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds used so far by process ``pid`` (all its threads)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def group_cpu_seconds(leaders: Sequence[int]) -> dict[int, float]:
    """CPU seconds used so far by every live process in the process groups led by ``leaders``
    (each child the benchmarks start leads its own session, so a group is everything it forked).
    A leader's count includes its reaped children's (``cutime``/``cstime``)."""
    groups = set(leaders)
    out: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, pgrp = int(entry.name), int(fields[2])
        if pgrp in groups:
            used = int(fields[11]) + int(fields[12])
            if pid in groups:
                used += int(fields[13]) + int(fields[14])
            out[pid] = used / CLOCK_TICKS
    return out


def pids_cpu_seconds(pids: Sequence[int]) -> dict[int, float]:
    """CPU seconds used so far by each of ``pids`` still alive."""
    out: dict[int, float] = {}
    for pid in pids:
        used = process_cpu_seconds(pid)
        if used is not None:
            out[pid] = used
    return out


def cpu_used(before: Mapping[int, float], after: Mapping[int, float]) -> float:
    """CPU seconds used between two snapshots by the processes alive at the second (one that
    appeared meanwhile counts from zero; one that exited meanwhile is lost)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def wait_until_quiet(max_wait: float, threshold: float = 0.25, sample: float = 2.0) -> float:
    """Waits (at most ``max_wait`` seconds) until the machine is less than ``threshold`` busy
    over a ``sample``-second window, so that other work does not skew a run; returns the last
    busy share measured (recorded with the run either way)."""
    deadline = time.monotonic() + max_wait
    while True:
        before = cpu_jiffies()
        time.sleep(sample)
        busy = busy_fraction(before, cpu_jiffies())
        if busy < threshold or time.monotonic() >= deadline:
            return busy


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def git_state() -> dict[str, object]:
    """The commit measured and whether the work tree had changes (read-only git commands)."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30, check=False
        )
        return done.stdout

    # Porcelain lines are "XY path": the first column may be a space, so nothing is stripped.
    changed = [line[3:] for line in git("status", "--porcelain").splitlines() if line.strip()]
    return {"commit": git("rev-parse", "HEAD").strip(), "dirty_files": changed}


def machine_info(pg_server_url: str | None) -> dict[str, object]:
    info: dict[str, object] = {
        "cores": os.cpu_count(),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "sqlite": sqlite3.sqlite_version,
        "memory_gb": _memory_gb(),
    }
    if pg_server_url is not None:
        info["postgresql"] = postgres_server_info(pg_server_url)
    return info


def _memory_gb() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None
