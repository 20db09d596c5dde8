"""B6's peer: APScheduler 3 running the same N every-minute cron jobs on the same PostgreSQL
(issue 18 names it). Used by ``bench/cron.py`` (``--peer``); runs in a child process of its own so
that its CPU is its own.

The setup mirrors tickwheel's as far as APScheduler allows: its ``SQLAlchemyJobStore`` on a
fresh database (the jobs are durable, as tickwheel's), one ``BackgroundScheduler`` with its
default thread pool (10) and job defaults (``misfire_grace_time`` 1 s, ``coalesce`` off), N jobs
``CronTrigger(minute="*")`` calling a no-op. It materialises nothing ahead and keeps no record of
a run: an occurrence exists only as the moment the scheduler runs it, so its figures are

- ``create_jobs_per_s``: ``add_job`` into the job store, one at a time (its only API), timed
  over the first ``TIMED_ADDS`` jobs;
- per boundary: ``ran`` (EVENT_JOB_EXECUTED), ``missed`` (EVENT_JOB_MISSED: more than the grace
  late, dropped, or never run by the end of the run), ``late_p50_s`` / ``late_p99_s`` (the
  event's instant - the scheduled instant), ``fire_eps`` (runs / the span of their instants);
- ``cpu_ms``: the scheduler process's CPU per occurrence due (run or missed: a missed one is
  fetched, unpickled and moved on all the same), plus ``pg_cpu_ms`` (its PostgreSQL backends').

    python -m bench.cron_aps <database url> <n> <boundaries> <settle s>   # prints one JSON line
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from bench._common import percentile, process_cpu_seconds

MINUTE = 60.0
TIMED_ADDS = 1000
"""Jobs added through ``add_job`` (one transaction each, ~75/s here: 50,000 would take 11
minutes); the rest are copies of the last one's row with their own id (``_copy_jobs``)."""


def noop() -> None:
    """The job: the cost measured is the scheduler's, as with tickwheel's no-op definition."""


def run(url: str, n: int, boundaries: int, settle: float) -> dict[str, Any]:
    from apscheduler.events import EVENT_JOB_EXECUTED, EVENT_JOB_MISSED, JobExecutionEvent
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.triggers.cron import CronTrigger

    engine_url = url.replace("postgresql://", "postgresql+psycopg://", 1)
    events: list[tuple[bool, float, float]] = []  # (ran, scheduled, at)
    lock = threading.Lock()

    def listen(event: JobExecutionEvent) -> None:
        with lock:
            events.append(
                (
                    event.code == EVENT_JOB_EXECUTED,
                    event.scheduled_run_time.timestamp(),
                    time.time(),
                )
            )

    scheduler = BackgroundScheduler(jobstores={"default": SQLAlchemyJobStore(url=engine_url)})
    scheduler.add_listener(listen, EVENT_JOB_EXECUTED | EVENT_JOB_MISSED)
    scheduler.start(paused=True)
    started = time.perf_counter()
    timed = min(n, TIMED_ADDS)
    for i in range(timed):
        scheduler.add_job(noop, CronTrigger(minute="*"), id=f"aps-{i:06}", name=f"aps-{i:06}")
    create_seconds = time.perf_counter() - started
    _copy_jobs(url, timed, n)
    created = time.time()
    # The first boundary after the jobs are in, with the scheduler running from well before it.
    first = (int((created + 5) // MINUTE) + 1) * MINUTE
    at = [first + i * MINUTE for i in range(boundaries)]
    pg_before = _pg_cpu(url)
    cpu_before = process_cpu_seconds_self()
    scheduler.resume()
    deadline = at[-1] + settle
    while time.time() < deadline:
        time.sleep(0.5)
    cpu = process_cpu_seconds_self() - cpu_before
    pg_cpu = _pg_cpu(url) - pg_before
    # No shutdown: at 50,000 jobs its thread is still moving jobs on, one UPDATE each, for many
    # minutes; what it has not run by now counts as missed, and the process exits (``main``).
    with lock:
        seen = list(events)
    per = [_boundary(seen, b, n) for b in at]
    ran = sum(int(p["ran"]) for p in per)
    out: dict[str, Any] = {
        name: statistics.median(values)
        for name in ("late_p50_s", "late_p99_s", "fire_eps")
        if (values := [p[name] for p in per if name in p])
    }
    out.update(
        create_jobs_per_s=timed / create_seconds,
        ran=ran,
        missed=sum(int(p["missed"]) for p in per),
        # Per occurrence due, run or missed: a missed one costs it the same fetch and update.
        cpu_ms=1000 * cpu / (n * boundaries),
        pg_cpu_ms=1000 * pg_cpu / (n * boundaries),
    )
    return out


def _copy_jobs(url: str, made: int, n: int) -> None:
    """Jobs ``made`` .. ``n - 1``: the job store's row of the last job ``add_job`` made, with
    the id and name changed in its pickled state; in one transaction, for a setup that takes
    seconds instead of minutes. The scheduler reads them as it would its own."""
    import pickle

    import psycopg

    if made >= n:
        return
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT next_run_time, job_state FROM apscheduler_jobs WHERE id = %s",
            (f"aps-{made - 1:06}",),
        ).fetchone()
        assert row is not None
        next_run, blob = row
        state = pickle.loads(blob)  # our own row, written a moment ago
        rows = []
        for i in range(made, n):
            job_id = f"aps-{i:06}"
            rows.append((job_id, next_run, pickle.dumps({**state, "id": job_id, "name": job_id})))
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO apscheduler_jobs (id, next_run_time, job_state) VALUES (%s, %s, %s)",
                rows,
            )


def _boundary(events: Sequence[tuple[bool, float, float]], at: float, n: int) -> dict[str, float]:
    mine = [(ran, when) for ran, scheduled, when in events if abs(scheduled - at) < 0.5]
    ran = [when for ok, when in mine if ok]
    out: dict[str, float] = {"ran": float(len(ran)), "missed": float(n - len(ran))}
    if ran:
        lates = [when - at for when in ran]
        out["late_p50_s"] = percentile(lates, 50)
        out["late_p99_s"] = percentile(lates, 99)
        span = max(ran) - min(ran)
        out["fire_eps"] = len(ran) / span if span > 0 else float("inf")
    return out


def process_cpu_seconds_self() -> float:
    return process_cpu_seconds(os.getpid()) or 0.0


def _pg_cpu(url: str) -> float:
    """CPU so far of the PostgreSQL backends serving this database (the job store's pooled
    connections: the same ones before and after, so a difference is the run's)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return sum(process_cpu_seconds(int(pid)) or 0.0 for (pid,) in rows)


if __name__ == "__main__":
    url, n, boundaries, settle = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    print(json.dumps(run(url, n, boundaries, settle)), flush=True)
    os._exit(0)  # without waiting for the scheduler's thread (see ``run``)
