"""The workloads that B2, B3, B4 and B5 measure, written once for every system:

- **drain**: N no-op executions due now are stored first; then W worker processes are started
  and the clock runs until all N are finished (executions/s end to end);
- **herd**: the workers are started first and idle; N executions are then stored, all due at the
  same instant a little in the future (``lead`` seconds, so that every one is stored before it);
  measured: when all were READY (tickwheel), when all had started, and each one's start
  lateness, its handler's ``time.time()`` at start (the journal) minus the instant;
- **submit** (B5): N executions due now stored by one client in this process, one call per
  execution (``submit_single_eps``), then N more in batches (``submit_batch_eps``). Like
  PgQueuer's batch enqueue, which returns a list of ids, tickwheel's batches are answered with
  receipts (``submit_many(..., answer="ids")``: each item's status and id);
  ``--submit-answer full`` measures the answer with whole executions instead;
- **idle** (B5): W worker processes started on an empty store and left alone: the CPU they and
  their database's server processes spend per second of nothing to do (``idle_cpu_ms_per_s_*``),
  measured over ``idle_seconds`` once they have settled (tickwheel: the schedulers' shares of
  the shards taken). What a deployment pays around the clock for workers waiting for work.

The drain also measures CPU per execution (``cpu_ms_per_execution_*``): the /proc CPU time of
the system's worker processes (``workers``) and of its database's server processes serving
them (``backend``: PostgreSQL backends; Redis's own count for Celery), from the first start to
the end, divided by the executions started meanwhile.

Every run happens in a temporary directory inside an ExitStack: the processes it started are
stopped (SIGTERM, then SIGKILL) and its database and broker keys removed whatever happens."""

from __future__ import annotations

import contextlib
import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import journal
from bench._common import busy_fraction, compile_sources, cpu_jiffies, cpu_used, percentile
from bench.systems import CpuSnapshot, System, TickwheelSystem

POLL_SECONDS = 0.1
CHECK_SECONDS = 2.0
# How fast each system stores executions through the path used here (per second, on the
# 2-core machine), to choose a herd's instant when --lead is not given: generous on purpose.
SUBMIT_RATE_GUESS = {
    "tickwheel": 1500.0, "tickwheel-limits": 1500.0, "procrastinate": 3000.0, "celery": 500.0,
    "pgqueuer": 5000.0,
}  # fmt: skip
# The lowest rate each system actually stored at in this session: a better guess.
observed_submit_eps: dict[str, float] = {}


def herd_lead(system_name: str, n: int, given: float | None) -> float:
    if given is not None:
        return given
    rate = observed_submit_eps.get(system_name, SUBMIT_RATE_GUESS[system_name])
    return 3.0 + 1.5 * n / rate


def note_submit_rate(system_name: str, eps: float) -> None:
    observed_submit_eps[system_name] = min(eps, observed_submit_eps.get(system_name, eps))


class RunFailed(RuntimeError):
    pass


LIMITED = "tickwheel-limits"
"""tickwheel with every execution under a concurrency limit: limit 1, fifo, over
``Config.limit_keys`` keys (B2 ``--limit-keys``), against the unlimited drain."""


@dataclass(frozen=True)
class Config:
    pg_url: str
    concurrency: int = 16
    timeout: float = 1800.0
    lead: float | None = None
    warmup: float = 3.0
    redis_url: str = "redis://127.0.0.1:6379/0"
    celery_pool: str = "threads"
    backend: str = "postgresql"
    database_url: str | None = None  # tickwheel on an existing database (B4's backlog)
    limit_keys: int = 1000  # the "tickwheel-limits" system: limit 1 per key over this many keys
    together: bool = False  # tickwheel: W worker processes each with a scheduler (B5)
    idle_seconds: float = 20.0  # idle: the window measured
    idle_settle: float = 30.0  # idle: seconds left to the started processes before it
    submit_answer: str = "ids"  # tickwheel's batch submit: receipts ("ids") or models ("full")


def make_system(
    name: str, stack: contextlib.ExitStack, tmp: Path, journal_path: Path, cfg: Config
) -> System:
    compile_sources()  # every system starts from compiled modules (bench/_common.py)
    if name in ("tickwheel", LIMITED):
        return TickwheelSystem(
            stack, tmp, journal_path, pg_url=cfg.pg_url, backend=cfg.backend,
            database_url=cfg.database_url, concurrency=cfg.concurrency, drain_timeout=cfg.timeout,
            limit_keys=cfg.limit_keys if name == LIMITED else 0, together=cfg.together,
            submit_answer=cfg.submit_answer,
        )  # fmt: skip
    from bench.peers import CelerySystem, PgQueuerSystem, ProcrastinateSystem

    if name == "pgqueuer":
        return PgQueuerSystem(
            stack, tmp, journal_path, pg_url=cfg.pg_url, concurrency=cfg.concurrency
        )
    if name == "procrastinate":
        return ProcrastinateSystem(
            stack, tmp, journal_path, pg_url=cfg.pg_url, concurrency=cfg.concurrency
        )
    if name == "celery":
        return CelerySystem(
            stack, tmp, journal_path, redis_url=cfg.redis_url,
            concurrency=cfg.concurrency, pool=cfg.celery_pool,
        )  # fmt: skip
    raise ValueError(f"unknown system {name!r}")


def in_sandbox(
    system_name: str, cfg: Config, body: Callable[[System, Path], dict[str, Any]]
) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tickwheel-bench-")))
        journal_path = tmp / "journal"
        system = make_system(system_name, stack, tmp, journal_path, cfg)
        return body(system, journal_path)


def wait_finished(
    system: System,
    journal_path: Path,
    n: int,
    timeout: float,
    since: float,
    on_first_start: Callable[[int], None] | None = None,
) -> tuple[float, list[list[float]]]:
    """Polls until all ``n`` are finished; returns the wall-clock time it saw that and the
    progress curve (seconds since ``since``, started). The journal says how many started; the
    system is asked whether they finished once all have started, and every few seconds
    before that (a failure that never reaches the handler shows there). ``on_first_start``
    is called with the count the first time any has started."""
    progress: list[list[float]] = []
    started = journal.Counter(journal_path)
    last_asked = 0.0
    while True:
        now = time.time()
        count = started()
        if count and on_first_start is not None:
            on_first_start(count)
            on_first_start = None
        progress.append([round(now - since, 2), count])
        if count >= n or now - last_asked > CHECK_SECONDS:
            last_asked = now
            succeeded, failed = system.finished()
            if failed:
                raise RunFailed(f"{failed} executions failed ({succeeded} succeeded)")
            if succeeded >= n:
                return time.time(), progress
        if now - since > timeout:
            raise RunFailed(f"only {count} of {n} started after {timeout:g} s")
        time.sleep(POLL_SECONDS)


def first_starts(journal_path: Path, n: int) -> tuple[list[float], int]:
    """Each execution's first start, and how many starts were repeats (redeliveries)."""
    starts = journal.read(journal_path)
    if len(starts) != n:
        raise RunFailed(f"the journal holds {len(starts)} distinct executions, not {n}")
    firsts = [min(times) for times in starts.values()]
    return firsts, sum(len(times) - 1 for times in starts.values())


def thin(progress: list[list[float]], points: int = 200) -> list[list[float]]:
    step = max(1, math.ceil(len(progress) / points))
    return progress[::step] + ([progress[-1]] if (len(progress) - 1) % step else [])


def drain(system_name: str, workers: int, n: int, cfg: Config) -> dict[str, Any]:
    def body(system: System, journal_path: Path) -> dict[str, Any]:
        submit_seconds = system.submit(n, None)
        note_submit_rate(system_name, n / submit_seconds)
        jiffies = cpu_jiffies()
        launched = time.time()
        system.start_workers(workers)
        first: list[tuple[int, CpuSnapshot]] = []
        done, progress = wait_finished(
            system, journal_path, n, cfg.timeout, launched,
            lambda count: first.append((count, system.cpu_snapshot())),
        )  # fmt: skip
        cpu = cpu_per_execution(first[0], system.cpu_snapshot(), n)
        busy = busy_fraction(jiffies, cpu_jiffies())
        firsts, repeats = first_starts(journal_path, n)
        active = max(firsts) - min(firsts)
        return {
            "submit_eps": n / submit_seconds,
            "drain_seconds": done - launched,
            "drain_eps": n / (done - launched),
            # Without the processes' start-up: first start to last start, from the journal.
            "steady_eps": n / active if active > 0 else None,
            "startup_s": min(firsts) - launched,
            "repeated_starts": repeats,
            "machine_busy_during": round(busy, 3),
            **cpu,
            **system.figures(None),
            "progress": thin(progress),
        }

    return in_sandbox(system_name, cfg, body)


def cpu_per_execution(
    first: tuple[int, CpuSnapshot], last: CpuSnapshot, n: int
) -> dict[str, float | None]:
    """Milliseconds of CPU per execution between the first start and the end: the start-up of
    the processes is left out, and so are the executions already started at the first look."""
    started_before, before = first
    executions = n - started_before
    if executions <= 0:
        return {f"cpu_ms_per_execution_{k}": None for k in ("workers", "backend", "total")}
    figures = {
        f"cpu_ms_per_execution_{part}": 1000 * cpu_used(before[part], last[part]) / executions
        for part in ("workers", "backend")
    }
    figures["cpu_ms_per_execution_total"] = sum(figures.values())
    return figures


def submit(
    system_name: str, n_single: int, n_batch: int, batch: int, cfg: Config
) -> dict[str, Any]:
    """Submission alone, nothing else running: one client, one call per execution, then
    batches, on one fresh system."""

    def body(system: System, journal_path: Path) -> dict[str, Any]:
        single = system.submit_single(n_single)
        batched = system.submit_batch(n_batch, batch)
        return {
            "submit_single_eps": n_single / single,
            "submit_batch_eps": None if batched is None else n_batch / batched,
            "batch_size": batch,
        }

    return in_sandbox(system_name, cfg, body)


def herd(system_name: str, workers: int, n: int, cfg: Config) -> dict[str, Any]:
    lead = herd_lead(system_name, n, cfg.lead)

    def body(system: System, journal_path: Path) -> dict[str, Any]:
        system.start_workers(workers)
        time.sleep(cfg.warmup)  # the processes are up, connected and idle
        system.finished()  # and none of them died starting
        if isinstance(system, TickwheelSystem):
            system.wait_shards_split()  # several schedulers: their shares settled
        instant = float(math.ceil(time.time() + lead))
        submit_seconds = system.submit(n, datetime.fromtimestamp(instant, UTC))
        stored = time.time()
        watch = (
            system.watch_claimable(instant, cfg.timeout + lead, n)
            if isinstance(system, TickwheelSystem)
            else None
        )
        note_submit_rate(system_name, n / submit_seconds)
        if stored > instant - 0.2:
            raise RunFailed(
                f"storing {n} executions took {submit_seconds:.1f} s, past the instant"
                f" ({lead:.1f} s after the start): give a larger --lead"
            )
        jiffies = cpu_jiffies()
        done, progress = wait_finished(system, journal_path, n, cfg.timeout + lead, instant)
        busy = busy_fraction(jiffies, cpu_jiffies())
        firsts, repeats = first_starts(journal_path, n)
        lateness = [at - instant for at in firsts]
        figures = {"all_ready_s": None, **system.figures(instant)}  # tickwheel's scheduler
        claimable = None if watch is None else watch.seconds()
        if watch is not None and claimable is None:
            claimable = figures["all_ready_s"]  # every row promoted: READY is claimable
        return {
            "lead_s": lead,
            "submit_eps": n / submit_seconds,
            "stored_before_instant_s": instant - stored,
            **figures,
            "all_claimable_s": claimable,
            "first_started_s": min(lateness),
            "all_started_s": max(lateness),
            "all_finished_s": done - instant,
            "lateness_p50_s": percentile(lateness, 50),
            "lateness_p99_s": percentile(lateness, 99),
            "lateness_max_s": max(lateness),
            "repeated_starts": repeats,
            "machine_busy_during": round(busy, 3),
            "progress": thin(progress),
        }

    return in_sandbox(system_name, cfg, body)


def idle(system_name: str, workers: int, cfg: Config) -> dict[str, Any]:
    """CPU per second of W idle worker processes and of their database's server processes, from
    /proc (Celery: Redis's own count of the whole server), over ``cfg.idle_seconds`` after the
    start-up (``cfg.warmup``, the shards' split among several tickwheel schedulers, then
    ``cfg.idle_settle``). Nothing is stored: each system's workers poll, listen or sleep as
    they do between bursts of work."""

    def body(system: System, journal_path: Path) -> dict[str, Any]:
        system.start_workers(workers)
        time.sleep(cfg.warmup)
        system.finished()  # none of them died starting
        if isinstance(system, TickwheelSystem):
            system.wait_shards_split()
        time.sleep(cfg.idle_settle)
        before, started = system.cpu_snapshot(), time.monotonic()
        time.sleep(cfg.idle_seconds)
        after, seconds = system.cpu_snapshot(), time.monotonic() - started
        succeeded, failed = system.finished()  # still alive, and nothing ran
        if succeeded or failed:
            raise RunFailed(f"idle workers ran {succeeded + failed} executions")
        figures = {
            f"idle_cpu_ms_per_s_{part}": 1000 * cpu_used(before[part], after[part]) / seconds
            for part in ("workers", "backend")
        }
        figures["idle_cpu_ms_per_s_total"] = sum(figures.values())
        return {**figures, "idle_seconds": seconds}

    return in_sandbox(system_name, cfg, body)


DRAIN_FIGURES = (
    "drain_eps",
    "steady_eps",
    "startup_s",
    "submit_eps",
    "drain_seconds",
    "cpu_ms_per_execution_workers",
    "cpu_ms_per_execution_backend",
    "cpu_ms_per_execution_total",
)
SUBMIT_FIGURES = ("submit_single_eps", "submit_batch_eps")
IDLE_FIGURES = (
    "idle_cpu_ms_per_s_workers",
    "idle_cpu_ms_per_s_backend",
    "idle_cpu_ms_per_s_total",
)
HERD_FIGURES = (
    "all_claimable_s",
    "all_ready_s",
    "first_started_s",
    "all_started_s",
    "all_finished_s",
    "lateness_p50_s",
    "lateness_p99_s",
    "lateness_max_s",
    "submit_eps",
)
