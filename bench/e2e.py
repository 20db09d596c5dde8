"""End-to-end benchmark: submit N no-op executions through the HTTP batch API, then let a
scheduler and W worker processes drain them, on SQLite and/or PostgreSQL.

    .venv-bench/bin/python -m bench.e2e --backend both --workers 1 2 --executions 20000 --runs 3

Every run starts from nothing: a fresh database (a SQLite file in a temporary directory, or a new
PostgreSQL database that is dropped afterwards), migrated with ``tickwheel db upgrade``; an
API-only ``tickwheel server --no-engine``; then ``tickwheel scheduler`` and W ``tickwheel worker``
processes. See bench/README.md for what each figure means."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

from bench._common import (
    LOOPBACK,
    REPO,
    TERMINAL,
    Database,
    Processes,
    busy_fraction,
    child_env,
    cpu_jiffies,
    free_port,
    git_state,
    machine_info,
    percentile,
    postgres_database,
    process_cpu_seconds,
    require_loopback,
    sqlite_database,
    tickwheel_executable,
    wait_until_quiet,
)

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/"
JOBS_MODULE = "tickwheel_bench_jobs"
DEFINITION_URI = "registry://jobs/noop"
POLL_SECONDS = 0.25
READY_TIMEOUT = 60.0
BACKENDS = ("sqlite", "postgresql")
# The figures of one run that get a median (name -> how the table shows it).
FIGURES = (
    "drain_eps",
    "steady_eps",
    "submit_eps",
    "lateness_p50_s",
    "lateness_p99_s",
    "lateness_max_s",
    "pickup_p50_s",
    "pickup_p99_s",
    "mean_claim_batch",
)

JOBS_SOURCE = '''\
"""No-op jobs of the tickwheel end-to-end benchmark."""


async def noop() -> dict[str, object]:
    return {}


def noop_sync() -> dict[str, object]:
    return {}
'''


def definition_yaml(sync: bool) -> str:
    entrypoint = f"{JOBS_MODULE}:{'noop_sync' if sync else 'noop'}"
    return textwrap.dedent(f"""\
        name: noop
        version: 1
        description: Does nothing (the end-to-end benchmark).
        execution:
          type: python
          entrypoint: {entrypoint}
        timeout: 30
        retry:
          maxAttempts: 1
        """)


@dataclass(frozen=True)
class Options:
    executions: int
    batch_size: int
    concurrency: int
    submit_concurrency: int
    sync_handler: bool
    pg_url: str
    drain_timeout: float
    limit_keys: int = 0
    """Each execution under a concurrency limit of 1 on key ``k<i mod limit_keys>`` (0: none)."""


# -- one run ------------------------------------------------------------------------------------


class RunFailed(RuntimeError):
    pass


@contextlib.contextmanager
def fresh_database(backend: str, directory: Path, pg_url: str) -> Iterator[Database]:
    if backend == "sqlite":
        with sqlite_database(directory) as db:
            yield db
    else:
        with postgres_database(pg_url) as pg:
            yield pg


def run_once(backend: str, workers: int, opts: Options) -> dict[str, Any]:
    """One complete run; every process and the database are gone when it returns or raises."""
    tickwheel = str(tickwheel_executable())
    env = child_env(TICKWHEEL_LOG_LEVEL="warning")
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tickwheel-bench-")))
        db = stack.enter_context(fresh_database(backend, tmp, opts.pg_url))
        procs = Processes(tmp / "logs")
        # LIFO: the processes stop before the database is dropped and the directory removed.
        stack.callback(procs.stop)

        jobs_dir, definitions_dir, server_dir = tmp / "jobs", tmp / "definitions", tmp / "server"
        for directory in (jobs_dir, definitions_dir, server_dir):
            directory.mkdir()
        (jobs_dir / f"{JOBS_MODULE}.py").write_text(JOBS_SOURCE)
        (definitions_dir / "noop.yaml").write_text(definition_yaml(opts.sync_handler))

        upgrade = subprocess.run(
            [tickwheel, "db", "upgrade", "--database-url", db.url],
            cwd=server_dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if upgrade.returncode != 0:
            raise RunFailed(f"tickwheel db upgrade failed:\n{upgrade.stdout}{upgrade.stderr}")

        port = free_port()
        procs.start(
            "server",
            [
                tickwheel, "server", "--no-engine", "--host", LOOPBACK, "--port", str(port),
                "--database-url", db.url, "--definitions", str(definitions_dir),
            ],
            env=env,
            cwd=server_dir,
        )  # fmt: skip
        base_url = f"http://{LOOPBACK}:{port}"
        api_key = wait_for_server(base_url, server_dir / "tickwheel.admin-key", procs)

        submit_seconds = asyncio.run(submit_all(base_url, api_key, opts))

        before = db.counts()
        if before.get("READY", 0) != opts.executions:
            raise RunFailed(f"expected {opts.executions} READY executions, found {before}")

        # The drain: the clock starts when the engine processes are launched.
        jiffies_before = cpu_jiffies()
        launched_wall, launched = time.time(), time.monotonic()
        procs.start("scheduler", [tickwheel, "scheduler", "--database-url", db.url],
                    env=env, cwd=server_dir)  # fmt: skip
        for i in range(workers):
            procs.start(
                f"worker-{i + 1}",
                [
                    tickwheel, "worker", "--concurrency", str(opts.concurrency),
                    "--path", str(jobs_dir), "--database-url", db.url,
                ],
                env=env,
                cwd=server_dir,
            )  # fmt: skip
        progress, counts, cpu_at_first = wait_for_drain(db, procs, opts, launched)
        drain_seconds = progress[-1][0]
        machine_busy = busy_fraction(jiffies_before, cpu_jiffies())
        cpu_now = cpu_by_child(procs)
        procs.stop()

        return {
            "backend": backend,
            "workers": workers,
            "executions": opts.executions,
            "final_counts": counts,
            "submit_seconds": submit_seconds,
            "submit_eps": opts.executions / submit_seconds,
            "drain_seconds": drain_seconds,
            "drain_eps": opts.executions / drain_seconds,
            # Of the whole machine, during the drain (includes PostgreSQL and anything else).
            "machine_busy_during_drain": round(machine_busy, 3),
            # CPU seconds per process from the first SUCCEEDED seen to the end of the drain
            # (process start-up excluded); compare with the run's active_seconds.
            "cpu_seconds_while_draining": {
                name: round(cpu_now[name] - cpu_at_first.get(name, 0.0), 2) for name in cpu_now
            },
            **analyse(db, launched_wall, opts.executions),
            "progress": [[round(t, 3), n] for t, n in progress],
        }


def wait_for_server(base_url: str, key_file: Path, procs: Processes) -> str:
    deadline = time.monotonic() + READY_TIMEOUT
    with httpx.Client(base_url=base_url, timeout=5.0) as http:
        while time.monotonic() < deadline:
            procs.check_alive()
            with contextlib.suppress(httpx.TransportError):
                if http.get("/readyz").status_code == 200 and key_file.exists():
                    key = key_file.read_text().strip()
                    if key:
                        return key
            time.sleep(0.1)
    raise RunFailed(f"the server was not ready within {READY_TIMEOUT:g} s:\n{procs.logs()}")


async def submit_all(
    base_url: str, api_key: str, opts: Options, execute_at: str | None = None
) -> float:
    """Submits every execution, due now or at ``execute_at`` (RFC 3339), in batches; returns
    the seconds it took (requests only: the batches' Python dicts are built before the clock
    starts)."""
    when = {} if execute_at is None else {"executeAt": execute_at}
    keys = opts.limit_keys

    def limit(i: int) -> dict[str, Any]:
        return {"concurrency": {"key": f"k{i % keys}", "limit": 1}} if keys else {}

    batches = [
        [
            {
                "definitionUri": DEFINITION_URI,
                "inputs": {},
                "idempotencyKey": f"bench-{i}",
                **when,
                **limit(i),
            }
            for i in range(start, min(start + opts.batch_size, opts.executions))
        ]
        for start in range(0, opts.executions, opts.batch_size)
    ]
    headers = {"Authorization": f"Bearer {api_key}"}
    queue: asyncio.Queue[list[dict[str, Any]]] = asyncio.Queue()
    for batch in batches:
        queue.put_nowait(batch)

    async def sender(http: httpx.AsyncClient) -> None:
        while not queue.empty():
            batch = queue.get_nowait()
            response = await http.post("/v1/executions/batch", json={"items": batch})
            if response.status_code != 200:
                raise RunFailed(f"batch submit: HTTP {response.status_code}: {response.text[:500]}")
            statuses = Counter(item["status"] for item in response.json()["items"])
            if statuses != Counter({201: len(batch)}):
                raise RunFailed(f"batch submit: item statuses {dict(statuses)}")

    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=300.0) as http:
        started = time.perf_counter()
        await asyncio.gather(*(sender(http) for _ in range(opts.submit_concurrency)))
        return time.perf_counter() - started


def cpu_by_child(procs: Processes) -> dict[str, float]:
    return {child.name: process_cpu_seconds(child.popen.pid) or 0.0 for child in procs.children}


def wait_for_drain(
    db: Database, procs: Processes, opts: Options, launched: float
) -> tuple[list[tuple[float, int]], dict[str, int], dict[str, float]]:
    """Polls the counts by status until every execution is finished; returns the progress
    (seconds since launch, SUCCEEDED), the final counts and each process's CPU seconds when
    the first execution had succeeded (start-up done)."""
    progress: list[tuple[float, int]] = []
    cpu_at_first: dict[str, float] | None = None
    while True:
        counts = db.counts()
        elapsed = time.monotonic() - launched
        succeeded = counts.get("SUCCEEDED", 0)
        progress.append((elapsed, succeeded))
        if cpu_at_first is None and succeeded > 0:
            cpu_at_first = cpu_by_child(procs)
        if sum(counts.get(status, 0) for status in TERMINAL) >= opts.executions:
            if succeeded != opts.executions:
                raise RunFailed(f"not every execution succeeded: {counts}\n{procs.logs()}")
            return progress, counts, cpu_at_first or {}
        procs.check_alive()
        if elapsed > opts.drain_timeout:
            raise RunFailed(f"not drained after {opts.drain_timeout:g} s: {counts}\n{procs.logs()}")
        time.sleep(POLL_SECONDS)


def analyse(db: Database, launched_wall: float, executions: int) -> dict[str, Any]:
    """Figures read from the database after the run (every process stopped)."""
    rows = db.first_attempts()
    if len(rows) != executions:
        raise RunFailed(f"{len(rows)} first attempts for {executions} executions")
    lateness = [r.started_at - r.execute_at for r in rows]
    # How long after the engine started could each execution have been picked up at the
    # earliest, and how long did it wait beyond that.
    pickup = [r.started_at - max(r.execute_at, launched_wall) for r in rows]
    first_start = min(r.started_at for r in rows)
    last_finish = max(r.finished_at or r.started_at for r in rows)
    # A claim stamps the same started_at on every attempt it creates (one transaction, one now).
    claims = {(r.worker_id, r.started_at) for r in rows}
    per_worker = Counter(r.worker_id for r in rows)
    return {
        "lateness_p50_s": percentile(lateness, 50),
        "lateness_p99_s": percentile(lateness, 99),
        "lateness_max_s": max(lateness),
        "pickup_p50_s": percentile(pickup, 50),
        "pickup_p99_s": percentile(pickup, 99),
        "startup_s": first_start - launched_wall,
        "active_seconds": last_finish - first_start,
        "steady_eps": executions / (last_finish - first_start),
        "claims": len(claims),
        "mean_claim_batch": len(rows) / len(claims),
        "attempts_total": db.attempt_total(),
        "executions_per_worker": sorted(per_worker.values(), reverse=True),
    }


# -- all runs -----------------------------------------------------------------------------------


def medians(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for run in runs:
        if "error" not in run:
            groups.setdefault((run["backend"], run["workers"]), []).append(run)
    return [
        {
            "backend": backend,
            "workers": workers,
            "runs": len(group),
            **{name: statistics.median(r[name] for r in group) for name in FIGURES},
        }
        for (backend, workers), group in sorted(groups.items())
    ]


def table(rows: Sequence[dict[str, Any]]) -> str:
    header = (
        f"{'backend':<11}{'W':>3}{'runs':>5}{'drain/s':>10}{'steady/s':>10}{'submit/s':>10}"
        f"{'late p50':>10}{'late p99':>10}{'late max':>10}{'pick p99':>10}{'claim':>7}"
    )
    lines = [header, "-" * len(header)]
    for m in rows:
        lines.append(
            f"{m['backend']:<11}{m['workers']:>3}{m['runs']:>5}{m['drain_eps']:>10.0f}"
            f"{m['steady_eps']:>10.0f}{m['submit_eps']:>10.0f}{m['lateness_p50_s']:>9.2f}s"
            f"{m['lateness_p99_s']:>9.2f}s{m['lateness_max_s']:>9.2f}s{m['pickup_p99_s']:>9.2f}s"
            f"{m['mean_claim_batch']:>7.1f}"
        )
    return "\n".join(lines)


def chart(runs: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in runs if "error" not in r]
    backends = [b for b in BACKENDS if any(m["backend"] == b for m in rows)]
    worker_counts = sorted({m["workers"] for m in rows})
    width = 0.8 / max(1, len(backends))
    colors = {"sqlite": "#4C72B0", "postgresql": "#DD8452"}
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    for b_index, backend in enumerate(backends):
        offset = (b_index - (len(backends) - 1) / 2) * width
        xs, heights = [], []
        for w_index, workers in enumerate(worker_counts):
            match = [m for m in rows if m["backend"] == backend and m["workers"] == workers]
            if match:
                xs.append(w_index + offset)
                heights.append(match[0]["drain_eps"])
        bars = ax.bar(xs, heights, width * 0.9, color=colors.get(backend), label=backend)
        ax.bar_label(bars, fmt="%.0f", label_type="center", color="white", fontsize=9)
        for w_index, workers in enumerate(worker_counts):
            points = [
                r["drain_eps"] for r in ok if (r["backend"], r["workers"]) == (backend, workers)
            ]
            ax.scatter(
                [w_index + offset] * len(points), points, color="black", s=12, zorder=3,
                label="runs" if b_index == 0 and w_index == 0 else None,
            )  # fmt: skip
    ax.set_xticks(range(len(worker_counts)), [f"{w} worker process{'es' * (w > 1)}"
                                              for w in worker_counts])  # fmt: skip
    ax.set_ylabel("drain throughput (executions/s)")
    n = ok[0]["executions"] if ok else 0
    ax.set_title(f"tickwheel end-to-end drain: {n:,} no-op executions (bars: median)")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=[*BACKENDS, "both"], default="sqlite")
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1, 2], help="worker-process counts to measure"
    )
    parser.add_argument("--executions", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3, help="repetitions (medians reported)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--batch-size", type=int, default=1000, help="executions per request")
    parser.add_argument("--concurrency", type=int, default=16, help="per worker process")
    parser.add_argument(
        "--submit-concurrency", type=int, default=1, help="batch requests in flight at once"
    )
    parser.add_argument(
        "--sync-handler",
        action="store_true",
        help="a plain def handler (runs in a thread) instead of async def",
    )
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help="PostgreSQL server (loopback only); a database is created per run",
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=120.0,
        help="before each run, wait up to this many seconds for the machine to be idle (0: no)",
    )
    parser.add_argument(
        "--replot", type=Path, metavar="JSON", help="only redraw the chart of an earlier result"
    )
    parser.add_argument("--drain-timeout", type=float, default=900.0, help="seconds per drain")
    args = parser.parse_args(argv)
    if min(args.workers) < 1 or args.executions < 1 or args.runs < 1:
        parser.error("--workers, --executions and --runs must be positive")
    if not 1 <= args.batch_size <= 1000:
        parser.error("--batch-size must be 1..1000 (the API's limit)")
    return args


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.replot is not None:
        saved = json.loads(args.replot.read_text())
        chart(saved["runs"], saved["medians"], args.replot.with_suffix(".png"))
        print(table(saved["medians"]))
        print(args.replot.with_suffix(".png"))
        return 0
    # SIGTERM and SIGHUP unwind like Ctrl-C, through every cleanup; SIGINT too when this was
    # started in the background (where it would otherwise be ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    backends = list(BACKENDS) if args.backend == "both" else [args.backend]
    if "postgresql" in backends:
        require_loopback(args.pg_url)
    opts = Options(
        executions=args.executions,
        batch_size=args.batch_size,
        concurrency=args.concurrency,
        submit_concurrency=args.submit_concurrency,
        sync_handler=args.sync_handler,
        pg_url=args.pg_url,
        drain_timeout=args.drain_timeout,
    )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    started = time.monotonic()
    runs: list[dict[str, Any]] = []
    interrupted = False
    try:
        for backend in backends:
            for workers in args.workers:
                for number in range(1, args.runs + 1):
                    label = f"{backend} W={workers} run {number}/{args.runs}"
                    print(f"{label}: ...", flush=True)
                    busy = wait_until_quiet(args.quiet_wait) if args.quiet_wait > 0 else None
                    load = os.getloadavg()[0]
                    try:
                        run = run_once(backend, workers, opts)
                    except Exception as exc:  # one failed run must not lose the others
                        print(
                            f"{label}: FAILED: {type(exc).__name__}: {exc}",
                            file=sys.stderr,
                            flush=True,
                        )
                        runs.append(
                            {
                                "backend": backend,
                                "workers": workers,
                                "run": number,
                                "error": f"{type(exc).__name__}: {exc}",
                            }
                        )
                        continue
                    run["run"] = number
                    run["load_1min_before"] = round(load, 2)
                    run["machine_busy_before"] = None if busy is None else round(busy, 3)
                    runs.append(run)
                    print(
                        f"{label}: submit {run['submit_eps']:.0f}/s, drain {run['drain_eps']:.0f}/s"
                        f" ({run['drain_seconds']:.1f} s), lateness p50 {run['lateness_p50_s']:.2f}"
                        f" s p99 {run['lateness_p99_s']:.2f} s; machine busy before/during"
                        f" {run['machine_busy_before']}/{run['machine_busy_during_drain']}",
                        flush=True,
                    )
    except KeyboardInterrupt:
        interrupted = True
        print("interrupted: processes stopped and databases dropped", file=sys.stderr)

    rows = medians(runs)
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / f"e2e-{stamp}.json"
    png_path = args.out / f"e2e-{stamp}.png"
    report = {
        "benchmark": "e2e",
        "started_at": stamp,
        "wall_seconds": round(time.monotonic() - started, 1),
        "interrupted": interrupted,
        "settings": {
            "backends": backends,
            "workers": args.workers,
            "executions": args.executions,
            "runs": args.runs,
            "batch_size": args.batch_size,
            "worker_concurrency": args.concurrency,
            "submit_concurrency": args.submit_concurrency,
            "handler": "sync" if args.sync_handler else "async",
        },
        "machine": machine_info(args.pg_url if "postgresql" in backends else None),
        "code": git_state(),
        "medians": rows,
        "runs": runs,
    }
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    if rows:
        chart(runs, rows, png_path)
        print()
        print(table(rows))
        print(f"\n{json_path}\n{png_path}")
    else:
        print(f"\nno successful run; {json_path}")
    failed = any("error" in r for r in runs)
    return 130 if interrupted else 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
