"""B6 cron: the Cron Service at scale, as an operator runs it (issue 18's table).

Per run, on a fresh database: an API-only ``tickwheel server --no-engine``, a ``tickwheel
scheduler`` and ``--workers`` ``tickwheel worker --concurrency C`` processes; N cron jobs
``* * * * *`` on the no-op definition, created by ``cron apply`` in process, 1,000 a time, in a
child process (timed: jobs created / s); then ``--instances`` ``tickwheel cron run`` processes
(HTTP, as in production) for ``--boundaries`` minute boundaries after the first one that every
job could be materialised for. Figures per boundary, then the median over the boundaries (and
over ``--runs``):

- ``lead_min_s`` / ``lead_p50_s``: occurrence - execution ``created_at`` (negative: created after
  its occurrence);
- ``late_p50_s`` / ``late_p99_s``: first attempt's start - occurrence;
- ``materialise_eps``: occurrences of the boundary / (last - first ``created_at``);
- ``missed`` (occurrences with no execution), ``misfires`` (history rows other than SUBMITTED);
- ``cron_cpu_ms``: CPU of the ``cron run`` processes per occurrence, ``server_cpu_ms`` the
  API server's, ``pg_cron_ms`` the PostgreSQL backends of the ``cron run`` processes (their
  claims and advances; told apart by ``application_name``), ``pg_all_ms`` every backend of the
  run's database (also the API server's inserts, the scheduler's and the worker's), all from the
  start of the ``cron run`` processes to the end;
- ``busy``: the share of the whole machine (all cores) busy while the boundary's occurrences
  were being materialised (first to last ``created_at``): near 1.0, the materialisation is
  bound by CPU, and more instances cannot make it faster.

``--peer apscheduler`` adds APScheduler 3 (``bench/cron_aps.py``) on a fresh database of the
same PostgreSQL, in the same session (run-major, as every case): its rows have ``instances`` 0.

``--src DIR`` runs the children on another source tree (``git archive <commit> src | tar -x``),
for a before/after comparison in one session.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import report
from bench._common import (
    REPO,
    PostgresDatabase,
    busy_fraction,
    cpu_jiffies,
    percentile,
    process_cpu_seconds,
)
from bench.systems import BENCH_TENANT, TickwheelSystem

MINUTE = 60.0
FIGURES = (
    "create_jobs_per_s", "lead_min_s", "lead_p50_s", "late_p50_s", "late_p99_s",
    "materialise_eps", "missed", "duplicated", "misfires", "cron_cpu_ms", "server_cpu_ms",
    "pg_cron_ms", "pg_all_ms", "busy",
)  # fmt: skip
CRON_APP = "bench-cron"
"""``application_name`` of the ``cron run`` processes' connections: their backends' CPU."""


async def create_jobs(database_url: str, n: int) -> float:
    """Creates ``n`` every-minute jobs through ``cron apply`` (in process, 1,000 per apply:
    the most the code before issue 18 took); returns the seconds it took."""
    from tickwheel.cron.jobs import CronJobs
    from tickwheel.store.factory import cron_store_for, open_store

    store = await open_store(database_url, pool_size=2)
    try:
        jobs = CronJobs(cron_store_for(store), store, BENCH_TENANT, "bench")
        started = time.perf_counter()
        for start in range(0, n, 1000):
            docs = [
                {"name": f"bench-{i:06}", "definitionUri": "noop", "expression": "* * * * *"}
                for i in range(start, min(n, start + 1000))
            ]
            await jobs.cron_apply(docs, False, False)
        return time.perf_counter() - started
    finally:
        await store.close()


def create_in_child(system: TickwheelSystem, n: int) -> float:
    """``create_jobs`` in a child process that imports tickwheel as the others do (``--src``):
    the code that writes the rows must be the code that migrated the database."""
    code = (
        "import asyncio, sys; from bench.cron import create_jobs; "
        f"print(asyncio.run(create_jobs(sys.argv[1], {n})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, system.db.url],
        env=system.env, cwd=REPO, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"creating the cron jobs failed:\n{done.stdout}{done.stderr}")
    return float(done.stdout.strip().splitlines()[-1])


def measure(args: argparse.Namespace, instances: int) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tickwheel-bench-")))
        system = TickwheelSystem(
            stack, tmp, tmp / "journal", pg_url=args.pg_url, concurrency=args.concurrency
        )
        if args.src is not None:  # must precede REPO: the children import tickwheel from it
            system.env["PYTHONPATH"] = f"{args.src}{os.pathsep}{REPO}"
        assert isinstance(system.db, PostgresDatabase)
        create_seconds = create_in_child(system, args.n)
        created = time.time()
        system.start_workers(args.workers)
        lead_option = ["--lead", str(args.lead)] if args.lead else []
        cron = []
        cron_url = f"{system.db.url}?application_name={CRON_APP}"
        pg_before = backend_cpu(system.db)
        server = next(c for c in system.procs.children if c.name == "server")
        server_before = process_cpu_seconds(server.popen.pid) or 0.0
        for i in range(instances):
            argv = [
                system.tool, "cron", "run", "--url", system.base_url, "--api-key", system.api_key,
                "--database-url", cron_url, "--tenant", BENCH_TENANT, *lead_option,
            ]  # fmt: skip
            cron.append(system.procs.start(f"cron-{i + 1}", argv, env=system.env, cwd=system.cwd))
        lead = args.lead if args.lead else 90.0
        # The first boundary every job can be materialised for in time, then B more.
        first = (int((created + lead) // MINUTE) + 1) * MINUTE
        boundaries = [first + i * MINUTE for i in range(args.boundaries)]
        deadline = boundaries[-1] + args.settle
        samples: list[tuple[float, tuple[int, int]]] = []
        while time.time() < deadline:
            system.procs.check_alive()
            samples.append((time.time(), cpu_jiffies()))
            time.sleep(0.5)
        cron_cpu = sum(process_cpu_seconds(c.popen.pid) or 0.0 for c in cron)
        server_cpu = (process_cpu_seconds(server.popen.pid) or 0.0) - server_before
        pg_after = backend_cpu(system.db)
        pg_cron = sum(cpu for (pid, app), cpu in pg_after.items() if app == CRON_APP)
        pg_all = sum(cpu - pg_before.get((pid, app), 0.0) for (pid, app), cpu in pg_after.items())
        system.procs.stop()
        figures = analyse(system.db, boundaries, args.n, samples)
        occurrences = max(1, figures.pop("_materialised"))
        return {
            "create_jobs_per_s": args.n / create_seconds,
            **figures,
            "cron_cpu_ms": 1000 * cron_cpu / occurrences,
            "server_cpu_ms": 1000 * server_cpu / occurrences,
            "pg_cron_ms": 1000 * pg_cron / occurrences,
            "pg_all_ms": 1000 * pg_all / occurrences,
        }


def backend_cpu(db: PostgresDatabase) -> dict[tuple[int, str], float]:
    """CPU seconds so far of each PostgreSQL backend serving ``db``, by (pid, application)."""
    rows = db._connection().execute(
        "SELECT pid, application_name FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    return {(int(pid), str(app)): process_cpu_seconds(int(pid)) or 0.0 for pid, app in rows}


def measure_peer(args: argparse.Namespace) -> dict[str, Any]:
    """APScheduler on a fresh database of the same server (``bench/cron_aps.py``), in a child
    process, as long as tickwheel's case: a few seconds to start, then the boundaries."""
    from bench._common import postgres_database

    with postgres_database(args.pg_url) as db:
        argv = [sys.executable, "-m", "bench.cron_aps", db.url, str(args.n)]
        argv += [str(args.boundaries), str(args.settle)]
        done = subprocess.run(
            argv, cwd=REPO, capture_output=True, text=True, timeout=3600, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"APScheduler failed:\n{done.stdout}{done.stderr}")
        figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return {
            "create_jobs_per_s": figures["create_jobs_per_s"],
            "late_p50_s": figures.get("late_p50_s"),
            "late_p99_s": figures.get("late_p99_s"),
            "materialise_eps": figures.get("fire_eps"),
            "missed": figures["missed"],
            "cron_cpu_ms": figures["cpu_ms"],
            "pg_all_ms": figures["pg_cpu_ms"],
        }


def analyse(
    db: PostgresDatabase,
    boundaries: Sequence[float],
    n: int,
    samples: Sequence[tuple[float, tuple[int, int]]] = (),
) -> dict[str, Any]:
    conn = db._connection()
    rows = conn.execute(
        "SELECT e.idempotency_key, extract(epoch FROM e.created_at)::float8,"
        " extract(epoch FROM a.started_at)::float8"
        " FROM executions e LEFT JOIN attempts a"
        "   ON a.execution_id = e.execution_id AND a.attempt_number = 1"
        " WHERE e.tenant = %s AND e.idempotency_key LIKE 'cron:%%'",
        (BENCH_TENANT,),
    ).fetchall()
    by_boundary: dict[float, list[tuple[float, float | None]]] = {b: [] for b in boundaries}
    keys = [str(key) for key, _, _ in rows]
    for key, created, started in rows:
        at = _occurrence(str(key))
        if at in by_boundary:
            by_boundary[at].append((float(created), None if started is None else float(started)))
    per: list[dict[str, float]] = []
    for at, found in by_boundary.items():
        if not found:
            per.append({"missed": float(n)})
            continue
        leads = [at - created for created, _ in found]
        lates = [started - at for _, started in found if started is not None]
        begin, end = min(c for c, _ in found), max(c for c, _ in found)
        span = end - begin
        per.append(
            {
                "busy": _busy(samples, begin, end),
                "lead_min_s": min(leads),
                "lead_p50_s": statistics.median(leads),
                "late_p50_s": percentile(lates, 50) if lates else float("nan"),
                "late_p99_s": percentile(lates, 99) if lates else float("nan"),
                "materialise_eps": len(found) / span if span > 0 else float("inf"),
                "missed": float(n - len(found)),
            }
        )
    (misfires,) = conn.execute(
        "SELECT count(*) FROM cron_occurrences o JOIN cron_jobs j USING (cron_job_id)"
        " WHERE j.tenant = %s AND o.outcome <> 'SUBMITTED'"
        " AND o.occurrence >= to_timestamp(%s) AND o.occurrence <= to_timestamp(%s)",
        (BENCH_TENANT, boundaries[0], boundaries[-1]),
    ).fetchone() or (0,)
    out: dict[str, Any] = {
        name: statistics.median([p[name] for p in per if name in p])
        for name in (
            "lead_min_s",
            "lead_p50_s",
            "late_p50_s",
            "late_p99_s",
            "materialise_eps",
            "busy",
        )
        if any(name in p for p in per)
    }
    out["missed"] = sum(p["missed"] for p in per)
    out["duplicated"] = len(keys) - len(set(keys))
    out["misfires"] = int(misfires)
    out["_materialised"] = len(keys)
    return out


def _busy(samples: Sequence[tuple[float, tuple[int, int]]], begin: float, end: float) -> float:
    """The machine's busy share from the last sample before ``begin`` to the first after
    ``end`` (samples every 0.5 s); NaN without samples around the window."""
    before = [s for at, s in samples if at <= begin]
    after = [s for at, s in samples if at >= end]
    if not before or not after:
        return float("nan")
    return busy_fraction(before[-1], after[0])


def _occurrence(key: str) -> float:
    """``cron:<id>:<RFC 3339 occurrence>`` → the occurrence, in epoch seconds."""
    text = key.split(":", 2)[2]
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).timestamp()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench cron", description=__doc__)
    report.add_common(parser, n=1000)
    parser.add_argument("--instances", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--boundaries", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=32, help="per worker")
    parser.add_argument("--lead", type=float, default=None, help="seconds (default: the setting's)")
    parser.add_argument("--settle", type=float, default=30.0, help="s after the last boundary")
    parser.add_argument("--src", type=Path, default=None, help="run the children on this src tree")
    parser.add_argument("--peer", choices=("apscheduler",), default=None)
    args = parser.parse_args(argv)
    report.check_common(parser, args)
    started = time.monotonic()
    cases = [
        report.Case({"n": args.n, "instances": k}, functools.partial(measure, args, k))
        for k in args.instances
    ]
    if args.peer == "apscheduler":
        cases.append(
            report.Case(
                {"n": args.n, "instances": 0},
                functools.partial(measure_peer, args),
                label=f"n={args.n} apscheduler",
            )
        )
    runs, interrupted = report.repeat(cases, args.runs, args.quiet_wait)
    rows = report.medians(runs, ["n", "instances"], FIGURES)
    settings = {
        "instances": args.instances, "boundaries": args.boundaries, "workers": args.workers,
        "concurrency": args.concurrency, "lead": args.lead, "src": str(args.src or "worktree"),
        "peer": args.peer,
    }  # fmt: skip
    path = report.write("b6-cron", args, settings, runs, rows, interrupted, started)
    print(table(rows))
    print(path)
    return 130 if interrupted else 1 if any("error" in r for r in runs) else 0


def table(rows: Sequence[dict[str, Any]]) -> str:
    """Tickwheel's rows with the ratio of 3 instances to 1 and APScheduler's (``instances``
    0: it has no instances to add, and no lead) beside them."""
    head = "| jobs, instances | jobs created/s | lead min / p50 s | late p50 / p99 s | "
    head += "occurrences/s (x 1 instance) | machine busy | missed / dup / misfires | "
    head += "CPU ms/occ: cron + its PG = own; + server + other PG = all |"
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        one = report.find(rows, n=r["n"], instances=1)
        times = report.ratio(r["materialise_eps"], one["materialise_eps"] if one else None)
        who = "APScheduler" if r["instances"] == 0 else str(r["instances"])
        own = _sum(r.get("cron_cpu_ms"), r.get("pg_cron_ms"))
        total = _sum(r.get("cron_cpu_ms"), r.get("server_cpu_ms"), r.get("pg_all_ms"))
        its_pg = r.get("pg_cron_ms")
        if r["instances"] == 0:  # one process and its job store's backends: all its own
            its_pg = r.get("pg_all_ms")
            own = total = _sum(r.get("cron_cpu_ms"), its_pg)
        lines.append(
            f"| {r['n']:,}, {who} | {_f(r['create_jobs_per_s'], 0)} "
            f"| {_f(r.get('lead_min_s'))} / {_f(r.get('lead_p50_s'))} "
            f"| {_f(r['late_p50_s'], 2)} / {_f(r['late_p99_s'], 2)} "
            f"| {_f(r['materialise_eps'], 0)} ({_f(times, 2)} x) | {_f(r.get('busy'), 2)} "
            f"| {_f(r['missed'], 0)} / {_f(r.get('duplicated'), 0)} / {_f(r.get('misfires'), 0)} "
            f"| {_f(r.get('cron_cpu_ms'), 2)} + {_f(its_pg, 2)} = {_f(own, 2)}; "
            f"{_f(total, 2)} |"
        )
    return "\n".join(lines)


def _sum(*values: float | None) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"
