"""B2 drain, B3 herd and B5 peers: the workloads of bench/workloads.py on tickwheel alone, or on
tickwheel, PgQueuer, Procrastinate and Celery in one session (each run of each system in turn,
so that all of them see the same machine)."""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Sequence
from typing import Any

from bench import report
from bench._common import require_loopback
from bench.workloads import (
    DRAIN_FIGURES,
    HERD_FIGURES,
    IDLE_FIGURES,
    LIMITED,
    SUBMIT_FIGURES,
    Config,
    drain,
    herd,
    idle,
    submit,
)

SYSTEMS = ("tickwheel", "pgqueuer", "procrastinate", "celery")
WORKLOADS = ("submit", "drain", "herd", "idle")
KEY = ["workload", "system", "workers"]


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--concurrency", type=int, default=16, help="jobs at once per worker process (all systems)"
    )
    parser.add_argument(
        "--lead", type=float, default=None,
        help="herd: seconds from the start of storing to the instant (default: from the rate"
        " the system stored at so far, generously)",
    )  # fmt: skip
    parser.add_argument(
        "--warmup", type=float, default=3.0, help="herd: seconds for workers to start"
    )


def config(args: argparse.Namespace, **extra: Any) -> Config:
    return Config(
        pg_url=args.pg_url, concurrency=args.concurrency, timeout=args.timeout, lead=args.lead,
        warmup=args.warmup, redis_url=getattr(args, "redis_url", Config.redis_url),
        celery_pool=getattr(args, "celery_pool", Config.celery_pool), **extra,
    )  # fmt: skip


def cases(
    systems: Sequence[str],
    drain_workers: Sequence[int],
    herd_workers: Sequence[int],
    n: int,
    cfg: Config,
    herd_n: int | None = None,
    submits: tuple[int, int] | None = None,
    idle_workers: Sequence[int] = (),
    **tag: Any,
) -> list[report.Case]:
    """``submits``: (executions submitted one at a time, batch size) for the submit workload
    (B5), which then stores ``n`` in batches too; ``idle_workers``: the idle workload's
    worker-process counts (B5)."""
    out: list[report.Case] = []
    for system in systems:
        if submits is not None:
            key = {**tag, "workload": "submit", "system": system, "workers": 0}
            single, batch = submits
            out.append(report.Case(key, functools.partial(submit, system, single, n, batch, cfg)))
        for w in drain_workers:
            key = {**tag, "workload": "drain", "system": system, "workers": w}
            out.append(report.Case(key, functools.partial(drain, system, w, n, cfg)))
        for w in herd_workers:
            key = {**tag, "workload": "herd", "system": system, "workers": w}
            out.append(report.Case(key, functools.partial(herd, system, w, herd_n or n, cfg)))
        for w in idle_workers:
            key = {**tag, "workload": "idle", "system": system, "workers": w}
            out.append(report.Case(key, functools.partial(idle, system, w, cfg)))
    return out


def medians(runs: Sequence[dict[str, Any]], key: Sequence[str]) -> list[dict[str, Any]]:
    def of(workload: str, figures: Sequence[str]) -> list[dict[str, Any]]:
        return report.medians([r for r in runs if r["workload"] == workload], key, figures)

    return (
        of("submit", SUBMIT_FIGURES)
        + of("drain", DRAIN_FIGURES)
        + of("herd", HERD_FIGURES)
        + of("idle", IDLE_FIGURES)
    )


def table(rows: Sequence[dict[str, Any]], key: Sequence[str]) -> str:
    lines = []
    for r in rows:
        name = " ".join(f"{r[k]}" for k in key)
        if r["workload"] == "submit":
            batch = r["submit_batch_eps"]
            lines.append(
                f"{name:<34} single {r['submit_single_eps'] or 0:>8,.0f}/s  batch "
                f"{'-' if batch is None else f'{batch:,.0f}/s':>10}  ({r['runs']} runs)"
            )
        elif r["workload"] == "drain":
            cpu = r.get("cpu_ms_per_execution_total")
            lines.append(
                f"{name:<34} drain {r['drain_eps'] or 0:>8,.0f}/s  steady"
                f" {r['steady_eps'] or 0:>8,.0f}/s  CPU {'-' if cpu is None else f'{cpu:.3f}'}"
                f" ms/execution  ({r['runs']} runs)"
            )
        elif r["workload"] == "idle":
            lines.append(
                f"{name:<34} idle CPU {r['idle_cpu_ms_per_s_total'] or 0:.2f} ms/s"
                f" (workers {r['idle_cpu_ms_per_s_workers'] or 0:.2f}, database"
                f" {r['idle_cpu_ms_per_s_backend'] or 0:.2f})  ({r['runs']} runs)"
            )
        else:
            ready = "-" if r["all_ready_s"] is None else f"{r['all_ready_s']:.2f} s"
            claimable = r.get("all_claimable_s")
            can = "-" if claimable is None else f"{claimable:.2f} s"
            lines.append(
                f"{name:<34} all claimable {can:>8}  all READY {ready:>8}  "
                f"first {r['first_started_s']:.3f} s  "
                f"all started {r['all_started_s']:.2f} s  "
                f"lateness p50 {r['lateness_p50_s']:.2f} p99 {r['lateness_p99_s']:.2f} max "
                f"{r['lateness_max_s']:.2f} s  ({r['runs']} runs)"
            )
    return "\n".join(lines)


def charts(
    path_stem: Any, title: str, rows: Sequence[dict[str, Any]], runs: Sequence[dict[str, Any]],
    series_key: str,
) -> None:  # fmt: skip
    """Two charts: drain throughput by worker count, herd start times by figure."""
    series_names = list(dict.fromkeys(r[series_key] for r in rows))
    drains = [r for r in rows if r["workload"] == "drain"]
    if drains:
        workers = sorted({r["workers"] for r in drains})
        report.bar_chart(
            path_stem.with_name(path_stem.name + "-drain.png"),
            f"{title}: drain, end to end (median; dots: runs)",
            "executions / s",
            [f"{w} worker process{'es' * (w > 1)}" for w in workers],
            {s: [_get(drains, series_key, s, w, "drain_eps") for w in workers]
             for s in series_names},
            {s: [[r["drain_eps"] for r in runs if r.get(series_key) == s and r["workers"] == w
                  and r["workload"] == "drain" and "error" not in r] for w in workers]
             for s in series_names},
        )  # fmt: skip
    herds = [r for r in rows if r["workload"] == "herd"]
    if herds:
        figures = ["all_claimable_s", "all_started_s", "lateness_p50_s", "lateness_p99_s"]
        report.bar_chart(
            path_stem.with_name(path_stem.name + "-herd.png"),
            f"{title}: herd, seconds after the instant (median)",
            "seconds",
            [f.removesuffix("_s").replace("_", " ") for f in figures],
            {s: [_first(herds, series_key, s, f) for f in figures] for s in series_names},
        )


def _get(rows: Sequence[dict[str, Any]], key: str, value: Any, workers: int, fig: str) -> Any:
    for r in rows:
        if r[key] == value and r["workers"] == workers:
            return r[fig]
    return None


def _first(rows: Sequence[dict[str, Any]], key: str, value: Any, fig: str) -> Any:
    return next((r[fig] for r in rows if r[key] == value), None)


# What each workload's ratios compare, and whether more is better (throughput) or less (times,
# CPU).
RATIO_FIGURES: dict[str, dict[str, bool]] = {
    "submit": {"submit_single_eps": True, "submit_batch_eps": True},
    "drain": {"drain_eps": True, "steady_eps": True, "cpu_ms_per_execution_total": False},
    "herd": {
        "first_started_s": False, "all_started_s": False,
        "lateness_p50_s": False, "lateness_p99_s": False,
    },
    "idle": {"idle_cpu_ms_per_s_total": False},
}  # fmt: skip


def peer_ratios(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """tickwheel ÷ peer, oriented so that above 1 means tickwheel did better: throughput as is,
    times and CPU inverted (peer's ÷ tickwheel's)."""
    out = []
    for peer in SYSTEMS[1:]:
        for r in rows:
            if r["system"] != peer:
                continue
            ours = report.find(
                rows, workload=r["workload"], system="tickwheel", workers=r["workers"]
            )
            if ours is None:
                continue
            figs = {
                f: report.ratio(ours[f], r[f]) if more else report.ratio(r[f], ours[f])
                for f, more in RATIO_FIGURES[r["workload"]].items()
            }
            out.append({"peer": peer, "workload": r["workload"], "workers": r["workers"], **figs})
    return out


def against_best_peer(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per figure: every system's median, the best peer and tickwheel ÷ that peer (the plain
    quotient: above 1 is better for throughput, below 1 for times and CPU)."""
    out = []
    cases = dict.fromkeys((r["workload"], r["workers"]) for r in rows)
    for workload, workers in cases:
        for figure, more in RATIO_FIGURES[workload].items():
            values = {
                r["system"]: r.get(figure)
                for r in rows
                if r["workload"] == workload and r["workers"] == workers
            }
            peers = {s: v for s, v in values.items() if s != "tickwheel" and v is not None}
            best = (max if more else min)(peers, key=lambda s: peers[s]) if peers else None
            ours = values.get("tickwheel")
            out.append({
                "workload": workload, "workers": workers, "figure": figure,
                "higher_is_better": more, "values": values, "best_peer": best,
                "tickwheel_over_best": None if best is None else report.ratio(ours, peers[best]),
            })  # fmt: skip
    return out


def best_table(summary: Sequence[dict[str, Any]], systems: Sequence[str]) -> str:
    head = f"{'figure':<44}" + "".join(f"{s:>14}" for s in systems) + "  tickwheel/best"
    lines = [head]
    for row in summary:
        label = f"{row['workload']} W={row['workers']} {row['figure']}"
        if row["workload"] == "submit":
            label = row["figure"]
        cells = "".join(f"{_num(row['values'].get(s)):>14}" for s in systems)
        ratio = row["tickwheel_over_best"]
        shown = "-" if ratio is None else f"{ratio:.2f} ({row['best_peer']})"
        arrow = "higher" if row["higher_is_better"] else "lower"
        lines.append(f"{label:<44}{cells}  {shown}  [{arrow} is better]")
    return "\n".join(lines)


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 10 else f"{value:.3f}"


def main(which: str, argv: Sequence[str] | None = None) -> int:
    """``which``: b2 (drain), b3 (herd) or b5 (both, on all three systems)."""
    parser = argparse.ArgumentParser(prog=f"python -m bench {which}", description=__doc__)
    report.add_common(parser, n=20_000 if which == "b5" else 100_000)
    add_engine_options(parser)
    if which in ("b2", "b5"):
        parser.add_argument("--workers", type=int, nargs="+", default=[1, 2],
                            help="drain: worker-process counts")  # fmt: skip
    if which == "b2":
        parser.add_argument(
            "--limit-keys", type=int, default=0,
            help="also drain as system tickwheel-limits: every execution under a concurrency"
            " limit of 1 (fifo) on one of this many keys (docs/flow-control.md); 0: not",
        )  # fmt: skip
    if which in ("b3", "b5"):
        parser.add_argument("--herd-workers", type=int, nargs="+", default=[2],
                            help="herd: worker-process counts")  # fmt: skip
    if which == "b5":
        parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
        parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
        parser.add_argument("--celery-pool", choices=("threads", "prefork"), default="threads")
        parser.add_argument("--herd-n", type=int, default=2000, help="executions in the herd")
        parser.add_argument(
            "--submit-single-n", type=int, default=2000,
            help="submit: executions stored one call each (then --n in batches)",
        )  # fmt: skip
        parser.add_argument("--submit-batch", type=int, default=1000, help="submit: batch size")
        parser.add_argument(
            "--submit-answer", choices=("ids", "full"), default="ids",
            help="submit: tickwheel's batches answered with receipts (ids, as PgQueuer's"
            " enqueue returns) or with the whole executions (full)",
        )  # fmt: skip
        parser.add_argument("--idle-workers", type=int, nargs="+", default=[2],
                            help="idle: worker-process counts")  # fmt: skip
        parser.add_argument(
            "--idle-seconds", type=float, default=Config.idle_seconds,
            help="idle: seconds of CPU measured, after the start-up",
        )  # fmt: skip
        parser.add_argument(
            "--idle-settle", type=float, default=Config.idle_settle,
            help="idle: seconds the started processes are left alone before the measure (what"
            " a long-running process pays, not its start: statements prepared, plans kept)",
        )  # fmt: skip
        parser.add_argument(
            "--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS),
            help="only these workloads (e.g. the drain alone while working on it)",
        )  # fmt: skip
    args = parser.parse_args(argv)
    report.check_common(parser, args)
    if which == "b5":
        require_loopback(args.redis_url)
    started = time.monotonic()
    systems = args.systems if which == "b5" else ["tickwheel"]
    limit_keys = getattr(args, "limit_keys", 0)
    if limit_keys:
        systems = [*systems, LIMITED]
    b5 = which == "b5"
    # B5 as issue 13 compares the peers: each tickwheel worker process is a scheduler and a
    # worker (``--with-scheduler``); B2 and B3 keep their scheduler apart, as before.
    cfg = config(
        args, limit_keys=limit_keys or Config.limit_keys, together=b5,
        submit_answer=getattr(args, "submit_answer", Config.submit_answer),
        idle_seconds=getattr(args, "idle_seconds", Config.idle_seconds),
        idle_settle=getattr(args, "idle_settle", Config.idle_settle),
    )  # fmt: skip
    workloads = getattr(args, "workloads", WORKLOADS)
    todo = cases(
        systems,
        getattr(args, "workers", []) if "drain" in workloads else [],
        getattr(args, "herd_workers", []) if "herd" in workloads else [],
        args.n, cfg,
        herd_n=args.herd_n if b5 else None,
        submits=(args.submit_single_n, args.submit_batch) if b5 and "submit" in workloads else None,
        idle_workers=args.idle_workers if b5 and "idle" in workloads else (),
    )  # fmt: skip
    runs, interrupted = report.repeat(todo, args.runs, args.quiet_wait)
    rows = medians(runs, KEY)
    summary = against_best_peer(rows) if b5 else []
    extra = (
        {"ratios_tickwheel_over_peer": peer_ratios(rows), "tickwheel_over_best_peer": summary}
        if b5
        else {}
    )
    name = {"b2": "b2-drain", "b3": "b3-herd", "b5": "b5-peers"}[which]
    settings = {
        "systems": systems, "worker_concurrency": args.concurrency,
        "tickwheel_scheduler_in_each_worker": b5,
        "workloads": list(workloads),
        "drain_workers": getattr(args, "workers", []),
        "herd_workers": getattr(args, "herd_workers", []), "lead": args.lead,
        "limit_keys": limit_keys,
        "celery_pool": getattr(args, "celery_pool", None),
        "herd_n": getattr(args, "herd_n", args.n),
        "submit_single_n": getattr(args, "submit_single_n", None),
        "submit_batch": getattr(args, "submit_batch", None),
        "submit_answer": getattr(args, "submit_answer", None),
        "idle_workers": getattr(args, "idle_workers", []),
        "idle_seconds": getattr(args, "idle_seconds", None),
        "idle_settle": getattr(args, "idle_settle", None),
    }  # fmt: skip
    path = report.write(name, args, settings, runs, rows, interrupted, started, extra)
    charts(path.with_suffix(""), f"{name.upper()} ({args.n:,} executions)", rows, runs, "system")
    print()
    print(table(rows, ["system", "workload", "workers"]))
    if summary:
        print()
        print(best_table(summary, systems))
    print(path)
    return 130 if interrupted else 1 if any("error" in r for r in runs) else 0
