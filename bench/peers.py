"""The peers of B5, set up the way their documentation suggests, behind bench/systems.py's
interface: Procrastinate (PostgreSQL; ``batch_defer_async`` with ``schedule_at``, ``procrastinate
worker`` processes with ``--concurrency``), Celery on Redis (``apply_async`` with ``eta``,
``celery worker`` processes, ``task_acks_late``) and PgQueuer on asyncpg (``Queries.enqueue``
with ``execute_after``, worker processes running ``pgqueuer.run`` with its defaults). Their
packages come with the ``bench`` extra; this module is imported only when a peer is measured."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from bench import journal
from bench._common import (
    REPO,
    Processes,
    child_env,
    group_cpu_seconds,
    pids_cpu_seconds,
    postgres_database,
)
from bench.journal import JOURNAL_ENV
from bench.systems import CpuSnapshot

DEFER_CHUNK = 1000
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def peer_executable(name: str) -> str:
    """The console script of this venv (where the ``bench`` extra installed it)."""
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} is not installed: pip install -e '.[bench]'")
    return found


class ProcrastinateSystem:
    name = "procrastinate"

    def __init__(
        self,
        stack: contextlib.ExitStack,
        tmp: Path,
        journal_path: Path,
        *,
        pg_url: str,
        concurrency: int = 16,
    ) -> None:
        from bench.jobs_procrastinate import DSN_ENV, make_app

        self.concurrency = concurrency
        self.db = stack.enter_context(postgres_database(pg_url))
        self.procs = Processes(tmp / "logs")
        stack.callback(self.procs.stop)
        self.app = make_app(self.db.url)
        self.env = child_env(
            PYTHONPATH=str(REPO), **{JOURNAL_ENV: str(journal_path), DSN_ENV: self.db.url}
        )
        self.cwd = tmp
        asyncio.run(self._apply_schema())

    async def _apply_schema(self) -> None:
        async with self.app.open_async():
            await self.app.schema_manager.apply_schema_async()

    def submit(self, n: int, execute_at: datetime | None) -> float:
        return asyncio.run(self._defer(n, execute_at))

    async def _defer(
        self, n: int, execute_at: datetime | None, chunk: int = DEFER_CHUNK, single: bool = False
    ) -> float:
        async with self.app.open_async():
            task = self.app.tasks["noop"]
            deferrer = task.configure(schedule_at=execute_at) if execute_at else task.configure()
            started = time.perf_counter()
            if single:
                for _ in range(n):
                    await deferrer.defer_async()
            else:
                for start in range(0, n, chunk):
                    await deferrer.batch_defer_async(*({} for _ in range(min(chunk, n - start))))
            return time.perf_counter() - started

    def submit_single(self, n: int) -> float:
        return asyncio.run(self._defer(n, None, single=True))

    def submit_batch(self, n: int, batch: int) -> float | None:
        return asyncio.run(self._defer(n, None, chunk=batch))

    def cpu_snapshot(self) -> CpuSnapshot:
        return {
            "workers": group_cpu_seconds(self.procs.leaders()),
            "backend": pids_cpu_seconds(self.db.backend_pids()),
        }

    def start_workers(self, workers: int) -> None:
        tool = peer_executable("procrastinate")
        for i in range(workers):
            self.procs.start(
                f"procrastinate-{i + 1}",
                [
                    tool, "--app", "bench.jobs_procrastinate.app", "--log-level", "warning",
                    "worker", "--concurrency", str(self.concurrency), "--name", f"w{i + 1}",
                ],
                env=self.env,
                cwd=self.cwd,
            )  # fmt: skip

    def finished(self) -> tuple[int, int]:
        self.procs.check_alive()
        rows = self.db._connection().execute(
            "SELECT status::text, count(*) FROM procrastinate_jobs GROUP BY status"
        )
        counts = {str(status): int(n) for status, n in rows}
        return counts.get("succeeded", 0), counts.get("failed", 0) + counts.get("aborted", 0)

    def figures(self, instant: float | None) -> dict[str, Any]:
        return {}


class CelerySystem:
    name = "celery"

    def __init__(
        self,
        stack: contextlib.ExitStack,
        tmp: Path,
        journal_path: Path,
        *,
        redis_url: str = DEFAULT_REDIS_URL,
        concurrency: int = 16,
        pool: str = "threads",
    ) -> None:
        import redis

        from bench.jobs_celery import BROKER_ENV, PREFIX_ENV, QUEUE, make_app

        self.concurrency = concurrency
        self.pool = pool
        self.started = journal.Counter(journal_path)
        self.prefix = f"tickwheel_bench_{uuid.uuid4().hex[:12]}:"
        self.redis = redis.Redis.from_url(redis_url)
        self.redis.ping()
        stack.callback(self._clean)
        self.procs = Processes(tmp / "logs")
        stack.callback(self.procs.stop)
        self.app = make_app(redis_url, self.prefix)
        stack.callback(self.app.close)
        self.queue_key = f"{self.prefix}{QUEUE}"
        self.unacked_key = f"{self.prefix}unacked"
        self.env = child_env(
            PYTHONPATH=str(REPO),
            **{JOURNAL_ENV: str(journal_path), BROKER_ENV: redis_url, PREFIX_ENV: self.prefix},
        )
        self.cwd = tmp

    def _clean(self) -> None:
        """Every key of this run, and only those."""
        keys = list(self.redis.scan_iter(match=f"{self.prefix}*", count=1000))
        for start in range(0, len(keys), 1000):
            self.redis.delete(*keys[start : start + 1000])
        self.redis.close()

    def submit(self, n: int, execute_at: datetime | None) -> float:
        """One producer connection for every message, as Celery's docs advise for many."""
        task = self.app.tasks["noop"]
        started = time.perf_counter()
        with self.app.producer_or_acquire() as producer:
            for _ in range(n):
                task.apply_async(eta=execute_at, producer=producer)
        return time.perf_counter() - started

    def start_workers(self, workers: int) -> None:
        tool = peer_executable("celery")
        for i in range(workers):
            self.procs.start(
                f"celery-{i + 1}",
                [
                    tool, "-A", "bench.jobs_celery", "worker", "--pool", self.pool,
                    "--concurrency", str(self.concurrency), "--loglevel", "WARNING",
                    "--without-gossip", "--without-mingle", "--hostname", f"w{i + 1}@bench",
                ],
                env=self.env,
                cwd=self.cwd,
            )  # fmt: skip

    def finished(self) -> tuple[int, int]:
        """Started (journal) and acknowledged: nothing left in the queue or unacknowledged.
        Celery keeps no record of a finished task without a result backend; a failure of the
        no-op would show as a start that never leaves ``unacked``."""
        self.procs.check_alive()
        started = self.started()
        pending = self.redis.llen(self.queue_key) + self.redis.hlen(self.unacked_key)
        return max(0, started - int(pending)), 0

    def figures(self, instant: float | None) -> dict[str, Any]:
        return {"pool": self.pool}

    def submit_single(self, n: int) -> float:
        """Celery sends one message per call anyway: the same loop as ``submit``."""
        return self.submit(n, None)

    def submit_batch(self, n: int, batch: int) -> float | None:
        return None  # no call sends many messages at once

    def cpu_snapshot(self) -> CpuSnapshot:
        """The broker's CPU from Redis's own INFO (the whole server: keep it to the benchmark)."""
        info = self.redis.info("cpu")
        redis_pid = int(self.redis.info("server")["process_id"])
        used = float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
        return {"workers": group_cpu_seconds(self.procs.leaders()), "backend": {redis_pid: used}}


class PgQueuerSystem:
    name = "pgqueuer"

    def __init__(
        self,
        stack: contextlib.ExitStack,
        tmp: Path,
        journal_path: Path,
        *,
        pg_url: str,
        concurrency: int = 16,
    ) -> None:
        """``concurrency`` is not passed on: PgQueuer runs what each dequeue (10) returns, with
        no per-process limit by default, and is measured with its defaults."""
        from bench.jobs_pgqueuer import DSN_ENV

        self.db = stack.enter_context(postgres_database(pg_url))
        self.procs = Processes(tmp / "logs")
        stack.callback(self.procs.stop)
        self.env = child_env(
            PYTHONPATH=str(REPO), **{JOURNAL_ENV: str(journal_path), DSN_ENV: self.db.url}
        )
        self.cwd = tmp
        asyncio.run(self._with_queries(lambda queries: queries.install()))

    async def _with_queries(self, body: Any) -> Any:
        import asyncpg
        from pgqueuer import AsyncpgDriver, Queries

        connection = await asyncpg.connect(self.db.url)
        try:
            return await body(Queries(AsyncpgDriver(connection)))
        finally:
            await connection.close()

    def submit(self, n: int, execute_at: datetime | None) -> float:
        return asyncio.run(self._with_queries(lambda q: self._enqueue(q, n, execute_at)))

    async def _enqueue(
        self, queries: Any, n: int, execute_at: datetime | None, chunk: int = DEFER_CHUNK
    ) -> float:
        from bench.jobs_pgqueuer import ENTRYPOINT

        started = time.perf_counter()
        for start in range(0, n, chunk):
            size = min(chunk, n - start)
            # ``execute_after`` is relative to the server's now(): taken afresh for each call.
            after = None if execute_at is None else execute_at - datetime.now(execute_at.tzinfo)
            await queries.enqueue([ENTRYPOINT] * size, [None] * size, [0] * size, [after] * size)
        return time.perf_counter() - started

    def submit_single(self, n: int) -> float:
        async def body(queries: Any) -> float:
            from bench.jobs_pgqueuer import ENTRYPOINT

            started = time.perf_counter()
            for _ in range(n):
                await queries.enqueue(ENTRYPOINT, None)
            return time.perf_counter() - started

        return float(asyncio.run(self._with_queries(body)))

    def submit_batch(self, n: int, batch: int) -> float | None:
        return float(asyncio.run(self._with_queries(lambda q: self._enqueue(q, n, None, batch))))

    def start_workers(self, workers: int) -> None:
        for i in range(workers):
            self.procs.start(
                f"pgqueuer-{i + 1}",
                [sys.executable, "-m", "bench.jobs_pgqueuer"],
                env=self.env,
                cwd=self.cwd,
            )

    def finished(self) -> tuple[int, int]:
        """Acknowledged jobs leave the queue table; their outcome is in the log."""
        self.procs.check_alive()
        rows = self.db._connection().execute(
            "SELECT status::text, count(*) FROM pgqueuer_log"
            " WHERE status IN ('successful', 'exception', 'canceled', 'failed') GROUP BY status"
        )
        counts = {str(status): int(n) for status, n in rows}
        return counts.pop("successful", 0), sum(counts.values())

    def figures(self, instant: float | None) -> dict[str, Any]:
        return {}

    def cpu_snapshot(self) -> CpuSnapshot:
        return {
            "workers": group_cpu_seconds(self.procs.leaders()),
            "backend": pids_cpu_seconds(self.db.backend_pids()),
        }
