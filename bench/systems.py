"""The systems the workloads run on, behind one small interface: tickwheel here, the peers in
bench/peers.py. A system is set up inside an ExitStack, so that whatever it started (processes,
databases, broker keys) is gone when the run ends, fails or is interrupted.

tickwheel is driven from outside as an operator would: ``tickwheel db upgrade``, an API-only
``tickwheel server`` that the executions are submitted to (``POST /v1/executions/batch``, the
machinery of bench/e2e.py), then ``tickwheel scheduler`` and W ``tickwheel worker`` processes, or
(B5) W ``tickwheel worker --with-scheduler`` processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import textwrap
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import psycopg

from bench import e2e
from bench._common import (
    LOOPBACK,
    REPO,
    Database,
    PostgresDatabase,
    Processes,
    child_env,
    free_port,
    group_cpu_seconds,
    pids_cpu_seconds,
    postgres_database,
    sqlite_database,
    tickwheel_executable,
)
from bench.journal import JOURNAL_ENV

# The tenant of every execution a run submits: a reused backlog database (B4) holds other rows.
BENCH_TENANT = "default"
SUBMIT_CONCURRENCY = 2


class SetupFailed(RuntimeError):
    pass


# Per process, CPU seconds so far: {"workers": {pid: s}, "backend": {pid: s}}.
CpuSnapshot = dict[str, dict[int, float]]


class System(Protocol):
    name: str

    def submit(self, n: int, execute_at: datetime | None) -> float:
        """Submits ``n`` no-op executions (due now, or all at ``execute_at``); returns seconds."""
        ...

    def start_workers(self, workers: int) -> None:
        """Starts W worker processes (and whatever else the system needs to run work)."""
        ...

    def finished(self) -> tuple[int, int]:
        """(succeeded, failed) so far."""
        ...

    def watch_claimable(self, instant: float, timeout: float, n: int) -> ClaimableWatch | None:
        """From ``instant`` on: when every execution of a herd of ``n`` is claimable."""
        ...

    def figures(self, instant: float | None) -> dict[str, Any]:
        """System-specific figures read after the run, e.g. when every execution was READY."""
        ...

    def submit_single(self, n: int) -> float:
        """Submits ``n`` due now one at a time from one client in this process; returns seconds."""
        ...

    def submit_batch(self, n: int, batch: int) -> float | None:
        """Submits ``n`` due now, ``batch`` per call; seconds, or None without a batch call."""
        ...

    def cpu_snapshot(self) -> CpuSnapshot:
        """CPU seconds so far, per process, of the system's worker processes (``workers``: all
        it started to run work) and of its store's server processes (``backend``)."""
        ...


def run_checked(argv: list[str], *, env: dict[str, str], cwd: Path, what: str) -> None:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode != 0:
        raise SetupFailed(f"{what} failed:\n{done.stdout}{done.stderr}")


def definition_yaml() -> str:
    return textwrap.dedent("""\
        name: noop
        version: 1
        description: Does nothing but note its start in the journal (the benchmark suite).
        execution:
          type: python
          entrypoint: bench.jobs_tickwheel:noop
        timeout: 30
        retry:
          maxAttempts: 1
        """)


class TickwheelSystem:
    name = "tickwheel"

    def __init__(
        self,
        stack: contextlib.ExitStack,
        tmp: Path,
        journal: Path,
        *,
        pg_url: str,
        backend: str = "postgresql",
        database_url: str | None = None,
        concurrency: int = 16,
        drain_timeout: float = 1800.0,
        limit_keys: int = 0,
        together: bool = False,
        submit_answer: str = "ids",
    ) -> None:
        """``database_url``: an existing, migrated-or-not database to use instead of a fresh
        one (B4's backlog database); the run's own executions are deleted from it afterwards.
        ``limit_keys``: every execution gets a concurrency limit of 1 (fifo) on one of this
        many keys, round robin (0: none). ``together``: see ``start_workers``.
        ``submit_answer``: ``submit_batch``'s ``submit_many(..., answer=)``."""
        self.concurrency = concurrency
        self.submit_answer = submit_answer
        self.together = together
        self.schedulers = 0
        self.limit_keys = limit_keys
        self.procs = Processes(tmp / "logs")
        self.db: Database
        if database_url is not None:
            pg = PostgresDatabase(database_url)
            stack.callback(pg.close)
            # Before the run: no key, so that the server writes a new admin key file; after it
            # (also after a failure), the run's executions go, the backlog stays.
            clean_reused_database(pg)
            stack.callback(clean_reused_database, pg)
            self.db = pg
        elif backend == "sqlite":
            self.db = stack.enter_context(sqlite_database(tmp))
        else:
            self.db = stack.enter_context(postgres_database(pg_url))
        # LIFO: the processes stop before the database is cleaned or dropped.
        stack.callback(self.procs.stop)
        self.tool = str(tickwheel_executable())
        # The checkout's own sources first: the venv's editable install may point at another
        # checkout (a worktree of the same repository measured against its main).
        path = os.pathsep.join((str(REPO / "src"), str(REPO)))
        self.env = child_env(
            TICKWHEEL_LOG_LEVEL="warning", PYTHONPATH=path, **{JOURNAL_ENV: str(journal)}
        )
        self.cwd = tmp / "server"
        definitions = tmp / "definitions"
        for directory in (self.cwd, definitions):
            directory.mkdir()
        (definitions / "noop.yaml").write_text(definition_yaml())
        self.drain_timeout = drain_timeout
        run_checked(
            [self.tool, "db", "upgrade", "--database-url", self.db.url],
            env=self.env, cwd=self.cwd, what="tickwheel db upgrade",
        )  # fmt: skip
        port = free_port()
        self.procs.start(
            "server",
            [
                self.tool, "server", "--no-engine", "--host", LOOPBACK, "--port", str(port),
                "--database-url", self.db.url, "--definitions", str(definitions),
            ],
            env=self.env,
            cwd=self.cwd,
        )  # fmt: skip
        self.base_url = f"http://{LOOPBACK}:{port}"
        self.api_key = e2e.wait_for_server(
            self.base_url, self.cwd / "tickwheel.admin-key", self.procs
        )

    def submit(self, n: int, execute_at: datetime | None) -> float:
        opts = self.options(n)
        at = None if execute_at is None else execute_at.isoformat().replace("+00:00", "Z")
        seconds = asyncio.run(e2e.submit_all(self.base_url, self.api_key, opts, at))
        return seconds

    def options(self, n: int) -> e2e.Options:
        return e2e.Options(
            executions=n,
            batch_size=1000,
            concurrency=self.concurrency,
            submit_concurrency=SUBMIT_CONCURRENCY,
            sync_handler=False,
            pg_url="",
            drain_timeout=self.drain_timeout,
            limit_keys=self.limit_keys,
        )

    def submit_single(self, n: int) -> float:
        """The SDK in this process on the in-process transport (no HTTP), one at a time."""
        from bench.b1_submit import sdk

        return asyncio.run(sdk(self.db.url, n, batch=False))

    def submit_batch(self, n: int, batch: int) -> float | None:
        from bench.b1_submit import sdk

        return asyncio.run(sdk(self.db.url, n, batch=True, size=batch, answer=self.submit_answer))

    def cpu_snapshot(self) -> CpuSnapshot:
        backend = self.db.backend_pids() if isinstance(self.db, PostgresDatabase) else []
        return {
            "workers": group_cpu_seconds(self.procs.leaders(without=["server"])),
            "backend": pids_cpu_seconds(backend),
        }

    def start_workers(self, workers: int) -> None:
        """W worker processes. ``together`` (B5, as issue 13 specifies the peers' comparison):
        each is a scheduler and a worker (``tickwheel worker --with-scheduler``), W processes
        as the peers have; apart (B2, B3, B4): one ``tickwheel scheduler`` beside them."""
        if not self.together:
            self.procs.start(
                "scheduler", [self.tool, "scheduler", "--database-url", self.db.url],
                env=self.env, cwd=self.cwd,
            )  # fmt: skip
        both = ["--with-scheduler"] if self.together else []
        for i in range(workers):
            self.procs.start(
                f"worker-{i + 1}",
                [
                    self.tool, "worker", "--concurrency", str(self.concurrency),
                    "--path", str(REPO), "--database-url", self.db.url, *both,
                ],
                env=self.env,
                cwd=self.cwd,
            )  # fmt: skip
        self.schedulers = workers if self.together else 1

    def wait_shards_split(self, timeout: float = 30.0) -> None:
        """Until the schedulers hold the 1024 shards in fair shares. Several schedulers started
        at once converge within two lease renewals (~7 s): the first takes every shard, hands
        the newcomers' shares back at its next renewal, and they take them at theirs, so a
        shard may go unpromoted for a renewal meanwhile. A herd waits for this (the drain does
        not: its executions are READY when stored)."""
        if not isinstance(self.db, PostgresDatabase) or self.schedulers < 2:
            return
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.db.url, autocommit=True) as conn:
            while True:
                rows = conn.execute(
                    "SELECT count(*) FROM shard_leases"
                    " WHERE owner IS NOT NULL AND expires_at > now() GROUP BY owner"
                ).fetchall()
                shares = sorted(int(n) for (n,) in rows)
                if len(shares) == self.schedulers and shares[-1] - shares[0] <= 1:
                    return
                if time.monotonic() > deadline:
                    raise SetupFailed(f"the schedulers' shards never split evenly: {shares}")
                time.sleep(0.1)

    def finished(self) -> tuple[int, int]:
        self.procs.check_alive()
        if isinstance(self.db, PostgresDatabase):
            # Only the run's tenant, through executions_tenant_status: never the backlog.
            rows = self.db._connection().execute(
                "SELECT status, count(*) FROM executions WHERE tenant = %s GROUP BY status",
                (BENCH_TENANT,),
            )
            counts = {str(status): int(n) for status, n in rows}
        else:
            counts = self.db.counts()
        return counts.get("SUCCEEDED", 0), counts.get("FAILED", 0) + counts.get("CANCELLED", 0)

    def watch_claimable(self, instant: float, timeout: float, n: int) -> ClaimableWatch | None:
        """From ``instant`` on: when every execution of a herd of ``n`` is claimable
        (PostgreSQL). Only for a herd its schedulers open (``DIRECT_MIN`` entries or more in
        each one's shards): for a smaller one the watch would only look, every
        ``CLAIMABLE_POLL_S`` for the whole herd, at shards that never open, and its looks (a
        query each, from a thread of this process) slowed the herd it measures (B5's herd of
        2,000: all started 0.41-0.46 s watched against 0.36-0.37 s, docs/scaling.md); there
        ``all_ready_s`` is exact."""
        from tickwheel.engine.scheduler import DIRECT_MIN

        if not isinstance(self.db, PostgresDatabase) or n < DIRECT_MIN * max(1, self.schedulers):
            return None
        return ClaimableWatch(self.db.url, instant, timeout)

    def figures(self, instant: float | None) -> dict[str, Any]:
        """When every execution of the run had become READY (the scheduler's part of a herd),
        from ``ready_at``, which the promotion stamps with the database's clock."""
        if instant is None or not isinstance(self.db, PostgresDatabase):
            return {}
        row = (
            self.db._connection()
            .execute(
                "SELECT extract(epoch FROM max(ready_at))::float8 FROM executions"
                " WHERE tenant = %s",
                (BENCH_TENANT,),
            )
            .fetchone()
        )
        last_ready = None if row is None or row[0] is None else float(row[0])
        return {"all_ready_s": None if last_ready is None else last_ready - instant}


CLAIMABLE_POLL_S = 0.005
"""Between two looks of ``ClaimableWatch`` (each look reads the 1,024 lease rows: ~1 ms)."""


class ClaimableWatch:
    """When every execution of a herd had become claimable, on a tickwheel whose claims take
    the due SCHEDULED rows of open shards as they are (migration 0022, docs/scaling.md,
    "Claiming a herd without promoting it"): there ``ready_at`` says nothing of it (a row
    claimed as it is gets its executeAt; one the claims left is promoted a grace later). Before
    the instant it notes the shards the run's executions are in; from the instant on, a thread
    looks every ``CLAIMABLE_POLL_S`` until every one of those shards is open through the
    instant, when each of the run's rows is either taken already or claimable by the plain
    claim (B3's and B5's no-ops are under no limit, pause or rate limit, which would keep a row
    from it and have it promoted instead). The figure is the end of that look: late by at most
    one look (~1 ms) and the pause before it. Without the column (a tickwheel that promotes
    every row) it is None and the caller takes ``all_ready_s``, which is then exact and costs no
    look during the herd; so it is also None if the shards never all opened (an instant too
    small to open them: ``DIRECT_MIN``)."""

    def __init__(self, url: str, instant: float, timeout: float) -> None:
        self._url, self._instant, self._timeout = url, instant, timeout
        self.at: float | None = None
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT 1 FROM information_schema.columns"
                " WHERE table_name = 'shard_leases' AND column_name = 'due_through'"
            ).fetchone()
            self.direct = row is not None
            self._shards: list[int] = []
            if self.direct:
                self._shards = [
                    int(r[0])
                    for r in conn.execute(
                        "SELECT DISTINCT shard_id FROM executions"
                        " WHERE tenant = %s AND status = 'SCHEDULED'",
                        (BENCH_TENANT,),
                    )
                ]
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        if self.direct:
            self._thread = threading.Thread(target=self._watch, daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        closed = (
            "SELECT count(*) FROM shard_leases WHERE shard_id = ANY (%s)"
            " AND (due_through IS NULL OR due_through < to_timestamp(%s))"
        )
        with psycopg.connect(self._url, autocommit=True) as conn:
            if self._stop.wait(max(0.0, self._instant - time.time())):
                return
            while time.time() < self._instant + self._timeout:
                row = conn.execute(closed, (self._shards, self._instant)).fetchone()
                if row is not None and int(row[0]) == 0:
                    self.at = time.time()
                    return
                if self._stop.wait(CLAIMABLE_POLL_S):
                    return

    def seconds(self) -> float | None:
        """After the herd: seconds from the instant to the look that found every shard open
        (None without direct claims, or if that never came)."""
        self._stop.set()  # the herd is over: no more looks (a herd promoted never opens)
        if self._thread is not None:
            self._thread.join(timeout=5)
        return None if self.at is None else self.at - self._instant


def clean_reused_database(db: PostgresDatabase) -> None:
    """Removes what a run left in a database that outlives it (attempts, events and outputs go
    with their executions, ON DELETE CASCADE), then vacuums every table, not only executions:
    a server without autovacuum (this project's CI machine runs with it off) kept each run's
    dead rows in the lease table (its 1,024 rows rewritten at every renewal) and the attempts,
    63,000 and 1.7 M after a few runs, and the next runs' lease renewals took 0.2-1.3 s where
    the fresh database of the empty case had none, which B4's backlog/empty ratio then counted
    against the backlog. The backlog's pages are all-visible (``bench/backlog.py``): skipped."""
    conn = db._connection()
    conn.execute("DELETE FROM executions WHERE tenant = %s", (BENCH_TENANT,))
    conn.execute("DELETE FROM api_keys")
    conn.execute("VACUUM (ANALYZE)")
