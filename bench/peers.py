"""The peers of B5, set up the way their documentation suggests, behind bench/systems.py's
interface: Procrastinate (PostgreSQL; ``batch_defer_async`` with ``schedule_at``, ``procrastinate
worker`` processes with ``--concurrency``) and Celery on Redis (``apply_async`` with ``eta``,
``celery worker`` processes, ``task_acks_late``). Their packages come with the ``bench`` extra;
this module is imported only when a peer is measured."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from bench import journal
from bench._common import REPO, Processes, child_env, postgres_database
from bench.journal import JOURNAL_ENV

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

    async def _defer(self, n: int, execute_at: datetime | None) -> float:
        import time

        async with self.app.open_async():
            task = self.app.tasks["noop"]
            deferrer = task.configure(schedule_at=execute_at) if execute_at else task.configure()
            started = time.perf_counter()
            for start in range(0, n, DEFER_CHUNK):
                await deferrer.batch_defer_async(*({} for _ in range(min(DEFER_CHUNK, n - start))))
            return time.perf_counter() - started

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
        import time

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
