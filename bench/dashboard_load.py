"""Dashboard under load: does the overview page stay responsive while executions flow at a
target rate (issue 6: "a thousand executions per second ... without freezing the page")?

    .venv-bench/bin/python -m bench.dashboard_load --rate 1000 --seconds 30 --backend sqlite

One run from nothing: a fresh database (a SQLite file in a temporary directory, or a new
PostgreSQL database dropped afterwards), migrated with ``tickwheel db upgrade``; an all-in-one
``tickwheel server`` (API, scheduler and an in-process worker) with a no-op ``async def``
definition; Debian's headless Chromium (``/usr/bin/chromium``, driven by Playwright) signed in
to the overview, with a ``longtask`` PerformanceObserver, a requestAnimationFrame frame-gap
recorder, an SSE-event counter and a MutationObserver on the counts; then executions due now
are pushed through ``POST /v1/executions/batch`` at ``--rate`` for ``--seconds``. See
bench/README.md for the figures."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

from bench._common import (
    CLOCK_TICKS,
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
)
from bench._common import (
    tickwheel_executable as tickwheel_exe,
)

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [  # as in tests/dashboard/test_browser.py
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
JOBS_MODULE = "tickwheel_dashload_jobs"
DEFINITION_URI = "registry://jobs/noop"
STATUSES = ("SCHEDULED", "READY", "RUNNING", "RETRY_WAIT", "SUCCEEDED", "FAILED", "CANCELLED")
READY_TIMEOUT = 60.0
LONG_TASK_FROZEN_MS = 200.0
FRAME_GAP_FROZEN_MS = 250.0

JOBS_SOURCE = '''\
"""No-op job of the tickwheel dashboard load benchmark."""


async def noop() -> dict[str, object]:
    return {}
'''
DEFINITION_YAML = textwrap.dedent(f"""\
    name: noop
    version: 1
    description: Does nothing (the dashboard load benchmark).
    execution:
      type: python
      entrypoint: {JOBS_MODULE}:noop
    timeout: 30
    retry:
      maxAttempts: 1
    """)

# Installed before any script of the page runs: everything is recorded in window.__bench.
PAGE_PROBE = """
(() => {
  const b = { longTasks: [], frames: [], sse: 0, sseBytes: 0, sseOpen: 0, sseErrors: 0,
              sseTimes: [], repaints: 0, repaintTimes: [], mutations: 0 };
  window.__bench = b;
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) b.longTasks.push([e.startTime, e.duration]);
    }).observe({ type: "longtask", buffered: true });
    b.longTaskSupported = true;
  } catch (e) { b.longTaskSupported = false; }
  let last = null;
  function frame(t) {
    if (last !== null) b.frames.push([t, t - last]);
    last = t;
    requestAnimationFrame(frame);
  }
  requestAnimationFrame(frame);
  const Native = window.EventSource;
  window.EventSource = class extends Native {
    constructor(url, init) {
      super(url, init);
      this.addEventListener("open", () => { b.sseOpen += 1; });
      this.addEventListener("error", () => { b.sseErrors += 1; });
      this.addEventListener("snapshot", (ev) => {
        b.sse += 1;
        b.sseBytes += ev.data.length;
        b.sseTimes.push(performance.now());
      });
    }
  };
  document.addEventListener("DOMContentLoaded", () => {
    const counts = document.querySelector("ul.counts");
    if (!counts) return;
    // One callback per batch of DOM changes: the page paints at most once per frame, so this
    // counts repaints that changed at least one count.
    new MutationObserver((records) => {
      b.repaints += 1;
      b.mutations += records.length;
      b.repaintTimes.push(performance.now());
    })
      .observe(counts, { childList: true, characterData: true, subtree: true });
  });
})();
"""


@dataclass(frozen=True)
class Options:
    backend: str
    rate: float
    seconds: float
    batch_size: int
    concurrency: int
    in_flight: int
    pg_url: str
    drain_timeout: float
    converge_timeout: float


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


# -- the server process ---------------------------------------------------------------------------


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc/<pid>/task/*/children)."""
    seen, todo = [], [pid]
    while todo:
        current = todo.pop()
        seen.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                todo.extend(int(c) for c in task.read_text().split())
    return seen


def rss_bytes(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def tree_cpu_seconds(pid: int) -> float:
    return sum(process_cpu_seconds(p) or 0.0 for p in process_tree(pid))


@dataclass
class Sampler:
    """CPU% (of one core) and RSS of the server's process tree, once a second."""

    pid: int
    samples: list[dict[str, float]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        t0 = time.monotonic()
        prev_t, prev_cpu = t0, tree_cpu_seconds(self.pid)
        while not self._stop.wait(1.0):
            now, cpu = time.monotonic(), tree_cpu_seconds(self.pid)
            rss = sum(rss_bytes(p) for p in process_tree(self.pid))
            self.samples.append(
                {
                    "t": round(now - t0, 2),
                    "cpu_pct": round(100.0 * (cpu - prev_cpu) / max(now - prev_t, 1e-6), 1),
                    "rss_mb": round(rss / 2**20, 1),
                }
            )
            prev_t, prev_cpu = now, cpu


# -- the load -------------------------------------------------------------------------------------


@dataclass
class LoadResult:
    requested: int = 0
    accepted: int = 0
    requests: int = 0
    errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    late_ticks: int = 0


async def push_load(base_url: str, api_key: str, opts: Options, result: LoadResult) -> None:
    """One batch of ``batch_size`` every ``batch_size / rate`` seconds on a fixed schedule, at
    most ``in_flight`` requests at once; when the server is slower than the schedule the batches
    start late (counted in ``late_ticks``) and the achieved rate says so."""
    interval = opts.batch_size / opts.rate
    ticks = max(1, round(opts.seconds / interval))
    gate = asyncio.Semaphore(opts.in_flight)
    headers = {"Authorization": f"Bearer {api_key}"}
    limits = httpx.Limits(max_connections=opts.in_flight)

    async def send(http: httpx.AsyncClient, tick: int) -> None:
        items = [
            {"definitionUri": DEFINITION_URI, "inputs": {}, "idempotencyKey": f"load-{tick}-{i}"}
            for i in range(opts.batch_size)
        ]
        began = time.perf_counter()
        try:
            response = await http.post("/v1/executions/batch", json={"items": items})
        except httpx.HTTPError as exc:
            result.errors.append(f"{type(exc).__name__}: {exc}")
            return
        finally:
            result.latencies.append(time.perf_counter() - began)
            gate.release()
        result.requests += 1
        if response.status_code != 200:
            result.errors.append(f"HTTP {response.status_code}: {response.text[:200]}")
            return
        statuses = Counter(item["status"] for item in response.json()["items"])
        result.accepted += statuses.get(201, 0)
        if set(statuses) != {201}:
            result.errors.append(f"item statuses {dict(statuses)}")

    async with httpx.AsyncClient(
        base_url=base_url, headers=headers, timeout=120.0, limits=limits
    ) as http:
        tasks: list[asyncio.Task[None]] = []
        started = time.perf_counter()
        for tick in range(ticks):
            due = started + tick * interval
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            await gate.acquire()
            if time.perf_counter() - due > interval:
                result.late_ticks += 1
            result.requested += opts.batch_size
            tasks.append(asyncio.create_task(send(http, tick)))
        await asyncio.gather(*tasks)
        # The schedule's length, or longer if the last request ended after it.
        result.seconds = max(time.perf_counter() - started, ticks * interval)


# -- one run --------------------------------------------------------------------------------------


def run(opts: Options, screenshot: Path) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    tickwheel = str(tickwheel_exe())
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tickwheel-dashload-")))
        db = stack.enter_context(fresh_database(opts.backend, tmp, opts.pg_url))
        procs = Processes(tmp / "logs")
        stack.callback(procs.stop)  # LIFO: before the database is dropped

        jobs_dir, definitions_dir, server_dir = tmp / "jobs", tmp / "definitions", tmp / "server"
        for directory in (jobs_dir, definitions_dir, server_dir):
            directory.mkdir()
        (jobs_dir / f"{JOBS_MODULE}.py").write_text(JOBS_SOURCE)
        (definitions_dir / "noop.yaml").write_text(DEFINITION_YAML)
        # The in-process worker imports the entrypoint: the module goes on the server's path.
        env = child_env(TICKWHEEL_LOG_LEVEL="warning", PYTHONPATH=str(jobs_dir))

        upgrade = subprocess.run(
            [tickwheel, "db", "upgrade", "--database-url", db.url],
            cwd=server_dir, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if upgrade.returncode != 0:
            raise RunFailed(f"tickwheel db upgrade failed:\n{upgrade.stdout}{upgrade.stderr}")

        port = free_port()
        server = procs.start(
            "server",
            [
                tickwheel, "server", "--host", LOOPBACK, "--port", str(port),
                "--database-url", db.url, "--definitions", str(definitions_dir),
                "--concurrency", str(opts.concurrency),
            ],
            env=env,
            cwd=server_dir,
        )  # fmt: skip
        base_url = f"http://{LOOPBACK}:{port}"
        api_key = wait_for_server(base_url, server_dir / "tickwheel.admin-key", procs)

        pw = stack.enter_context(sync_playwright())
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        stack.callback(browser.close)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.set_default_timeout(30_000)
        page.add_init_script(PAGE_PROBE)
        page.goto(base_url + "/")
        page.fill("#api_key", api_key)
        page.keyboard.press("Enter")
        page.wait_for_url(base_url + "/")
        page.wait_for_selector("#live-state:has-text('live')")
        time.sleep(2.0)  # let the first series and paint settle before measuring

        # -- the load, with the page open ----------------------------------------------------------
        sampler = Sampler(server.popen.pid)
        load = LoadResult()
        failure: list[BaseException] = []

        def load_thread() -> None:
            try:
                asyncio.run(push_load(base_url, api_key, opts, load))
            except BaseException as exc:  # reported by the main thread
                failure.append(exc)

        page_t0 = float(page.evaluate("performance.now()"))
        cpu0, jiffies0, wall0 = tree_cpu_seconds(server.popen.pid), cpu_jiffies(), time.monotonic()
        sampler.start()
        worker = threading.Thread(target=load_thread, name="load", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(0.5)
            procs.check_alive()
        wall1 = time.monotonic()
        cpu1, jiffies1 = tree_cpu_seconds(server.popen.pid), cpu_jiffies()
        page_t1 = float(page.evaluate("performance.now()"))
        counts_at_end_of_load = db.counts()
        if failure:
            raise RunFailed(f"the load failed: {failure[0]!r}")

        # -- drain, then do the page's counts converge to the database's? -------------------------
        drained_at, db_counts = wait_for_drain(db, procs, load.accepted, opts.drain_timeout)
        drain_s = drained_at - wall1
        sampler.stop()
        converged, converge_s, page_counts = wait_for_convergence(
            page, db_counts, opts.converge_timeout
        )
        probe = page.evaluate("window.__bench")
        page_t2 = float(page.evaluate("performance.now()"))
        page.screenshot(path=str(screenshot))
        rss_peak = max((s["rss_mb"] for s in sampler.samples), default=0.0)
        during = [s for s in sampler.samples if s["t"] <= wall1 - wall0 + 0.5]

        return {
            "backend": opts.backend,
            "target_rate": opts.rate,
            "seconds": opts.seconds,
            "load": {
                "requested": load.requested,
                "accepted": load.accepted,
                "requests": load.requests,
                "push_seconds": round(load.seconds, 2),
                "achieved_rate": round(load.accepted / load.seconds, 1) if load.seconds else 0.0,
                "late_ticks": load.late_ticks,
                "request_p50_ms": round(1000 * percentile(load.latencies, 50), 1),
                "request_p99_ms": round(1000 * percentile(load.latencies, 99), 1),
                "request_max_ms": round(1000 * max(load.latencies, default=0.0), 1),
                "errors": load.errors[:20],
                "error_count": len(load.errors),
            },
            "drain_after_load_s": round(drain_s, 2),
            "finished_during_load": sum(counts_at_end_of_load.get(s, 0) for s in TERMINAL),
            "counts_at_end_of_load": counts_at_end_of_load,
            "page_during_load": page_figures(probe, page_t0, page_t1),
            "page_whole_session": page_figures(probe, 0.0, page_t2),
            "sse": {
                "events": probe["sse"],
                "bytes": probe["sseBytes"],
                "opens": probe["sseOpen"],
                "errors": probe["sseErrors"],
                "events_during_load": sum(1 for t in probe["sseTimes"] if page_t0 <= t <= page_t1),
            },
            "repaints": probe["repaints"],
            "repaints_during_load": sum(
                1 for t in probe["repaintTimes"] if page_t0 <= t <= page_t1
            ),
            "mutation_records": probe["mutations"],
            "counts": {
                "database": db_counts,
                "page": page_counts,
                "converged": converged,
                "converge_after_drain_s": None if converge_s is None else round(converge_s, 2),
            },
            "server": {
                "cpu_pct_mean_during_load": round(100 * (cpu1 - cpu0) / (wall1 - wall0), 1),
                "cpu_pct_max_1s": max((s["cpu_pct"] for s in during), default=0.0),
                "rss_mb_peak": rss_peak,
                "rss_mb_end": sampler.samples[-1]["rss_mb"] if sampler.samples else None,
                "samples": sampler.samples,
            },
            "machine_busy_during_load": round(busy_fraction(jiffies0, jiffies1), 3),
            "console_errors": problems[:20],
        }


def page_figures(probe: dict[str, Any], t0: float, t1: float) -> dict[str, Any]:
    longs = [d for start, d in probe["longTasks"] if t0 <= start <= t1]
    gaps = [g for t, g in probe["frames"] if t0 <= t <= t1]
    return {
        "window_s": round((t1 - t0) / 1000, 2),
        "long_task_supported": probe.get("longTaskSupported"),
        "long_tasks": len(longs),
        "long_task_total_ms": round(sum(longs), 1),
        "long_task_max_ms": round(max(longs, default=0.0), 1),
        "frames": len(gaps),
        "frame_gap_p50_ms": round(percentile(gaps, 50), 1) if gaps else None,
        "frame_gap_p99_ms": round(percentile(gaps, 99), 1) if gaps else None,
        "frame_gap_max_ms": round(max(gaps), 1) if gaps else None,
        "frame_gaps_over_250ms": sum(1 for g in gaps if g > FRAME_GAP_FROZEN_MS),
        "froze": bool(
            any(d > LONG_TASK_FROZEN_MS for d in longs)
            or any(g > FRAME_GAP_FROZEN_MS for g in gaps)
        ),
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


def wait_for_drain(
    db: Database, procs: Processes, expected: int, timeout: float
) -> tuple[float, dict[str, int]]:
    """Until every accepted execution is finished (or ``timeout``); returns when, and counts."""
    deadline = time.monotonic() + timeout
    while True:
        counts = db.counts()
        if sum(counts.get(s, 0) for s in TERMINAL) >= expected or time.monotonic() > deadline:
            return time.monotonic(), {s: counts.get(s, 0) for s in STATUSES}
        procs.check_alive()
        time.sleep(0.25)


def wait_for_convergence(
    page: Any, db_counts: dict[str, int], timeout: float
) -> tuple[bool, float | None, dict[str, int | None]]:
    started = time.monotonic()
    read = "() => Object.fromEntries([...document.querySelectorAll('[data-count]')]" \
        ".map((e) => [e.dataset.count, e.textContent]))"  # fmt: skip
    while True:
        raw = page.evaluate(read)
        shown = {s: int(raw[s]) if str(raw.get(s, "")).isdigit() else None for s in STATUSES}
        if shown == db_counts:
            return True, time.monotonic() - started, shown
        if time.monotonic() - started > timeout:
            return False, None, shown
        time.sleep(0.1)


# -- output ---------------------------------------------------------------------------------------


def table(r: dict[str, Any]) -> str:
    p, ld, srv = r["page_during_load"], r["load"], r["server"]
    rows = [
        ("backend", r["backend"]),
        ("target rate", f"{r['target_rate']:.0f}/s for {r['seconds']:g} s"),
        ("achieved rate", f"{ld['achieved_rate']:.0f}/s ({ld['accepted']} accepted)"),
        (
            "batch request p50/p99/max",
            f"{ld['request_p50_ms']}/{ld['request_p99_ms']}/"
            f"{ld['request_max_ms']} ms, {ld['late_ticks']} late",
        ),
        ("finished during load", str(r["finished_during_load"])),
        ("drain after load", f"{r['drain_after_load_s']} s"),
        (
            "long tasks (n/total/max)",
            f"{p['long_tasks']} / {p['long_task_total_ms']} ms / {p['long_task_max_ms']} ms",
        ),
        (
            "frame gap p50/p99/max",
            f"{p['frame_gap_p50_ms']}/{p['frame_gap_p99_ms']}/"
            f"{p['frame_gap_max_ms']} ms ({p['frames']} frames)",
        ),
        (
            "SSE events / repaints",
            f"{r['sse']['events_during_load']} / "
            f"{r['repaints_during_load']} during load; "
            f"{r['sse']['events']} / {r['repaints']} in all",
        ),
        (
            "counts converged",
            f"{r['counts']['converged']} (after {r['counts']['converge_after_drain_s']} s)",
        ),
        (
            "server CPU mean/max",
            f"{srv['cpu_pct_mean_during_load']}% / {srv['cpu_pct_max_1s']}% of one core",
        ),
        ("server RSS peak/end", f"{srv['rss_mb_peak']} / {srv['rss_mb_end']} MB"),
        ("machine busy during load", f"{100 * r['machine_busy_during_load']:.0f}% of all cores"),
        ("page froze", str(p["froze"])),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--rate", type=float, default=1000.0, help="executions per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to push")
    parser.add_argument("--batch-size", type=int, default=100, help="executions per request")
    parser.add_argument("--in-flight", type=int, default=4, help="batch requests at once, max")
    parser.add_argument("--concurrency", type=int, default=32, help="in-process worker")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL, help="loopback PostgreSQL server")
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--converge-timeout", type=float, default=15.0)
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.seconds <= 0 or args.in_flight < 1:
        parser.error("--rate, --seconds and --in-flight must be positive")
    if not 1 <= args.batch_size <= 1000:
        parser.error("--batch-size must be 1..1000 (the API's limit)")
    if not Path(CHROMIUM).exists():
        parser.error(f"{CHROMIUM} is missing (apt-get install chromium)")
    return args


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    if args.backend == "postgresql":
        require_loopback(args.pg_url)
    opts = Options(
        backend=args.backend,
        rate=args.rate,
        seconds=args.seconds,
        batch_size=args.batch_size,
        concurrency=args.concurrency,
        in_flight=args.in_flight,
        pg_url=args.pg_url,
        drain_timeout=args.drain_timeout,
        converge_timeout=args.converge_timeout,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    report: dict[str, Any] = {
        "benchmark": "dashboard_load",
        "started_at": stamp,
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "pg_url")},
        "machine": machine_info(args.pg_url if args.backend == "postgresql" else None),
        "code": git_state(),
        "clock_ticks": CLOCK_TICKS,
    }
    path = args.out / f"dashboard-load-{args.backend}-{stamp}.json"
    code = 0
    try:
        report["result"] = run(opts, path.with_suffix(".png"))
    except KeyboardInterrupt:
        print("interrupted: processes stopped and database dropped", file=sys.stderr)
        report["interrupted"] = True
        code = 130
    except Exception as exc:
        print(f"FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        report["error"] = f"{type(exc).__name__}: {exc}"
        code = 1
    path.write_text(json.dumps(report, indent=2) + "\n")
    if "result" in report:
        print(table(report["result"]))
    print(path)
    return code


if __name__ == "__main__":
    sys.exit(main())
