"""What every benchmark of the suite shares: the common options, repeated runs (one failed run
never loses the others; Ctrl-C, SIGTERM and SIGHUP stop cleanly and still write what was
measured), medians per case, the result JSON (machine, commit, sizes, each run, the medians) and
a grouped bar chart."""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from bench._common import (
    REPO,
    git_state,
    machine_info,
    require_loopback,
    wait_until_quiet,
)

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/"


def add_common(parser: argparse.ArgumentParser, n: int) -> None:
    parser.add_argument("--n", type=int, default=n, help=f"executions per run (default {n:,})")
    parser.add_argument("--runs", type=int, default=3, help="repetitions; medians are reported")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument(
        "--pg-url", default=DEFAULT_PG_URL,
        help="PostgreSQL server (loopback only); every run gets its own database",
    )  # fmt: skip
    parser.add_argument(
        "--quiet-wait", type=float, default=60.0,
        help="before each run, wait up to this many seconds for the machine to be idle (0: no)",
    )  # fmt: skip
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per drain or herd")


def check_common(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.n < 1 or args.runs < 1:
        parser.error("--n and --runs must be positive")
    require_loopback(args.pg_url)


@dataclass
class Case:
    """One configuration measured ``runs`` times: ``key`` names it in the JSON and the medians."""

    key: dict[str, Any]
    measure: Callable[[], dict[str, Any]]
    label: str = field(default="")

    def __post_init__(self) -> None:
        if not self.label:
            self.label = " ".join(f"{k}={v}" for k, v in self.key.items())


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def repeat(
    cases: Sequence[Case], runs: int, quiet_wait: float
) -> tuple[list[dict[str, Any]], bool]:
    """Runs every case ``runs`` times, run-major (case A, case B, case A, ...) so that a drift of
    the machine's load spreads over all cases instead of biasing one. Returns the runs and
    whether the session was interrupted."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)
    results: list[dict[str, Any]] = []
    try:
        for number in range(1, runs + 1):
            for case in cases:
                label = f"{case.label} run {number}/{runs}"
                print(f"{label}: ...", flush=True)
                busy = wait_until_quiet(quiet_wait) if quiet_wait > 0 else None
                base = {
                    **case.key,
                    "run": number,
                    "load_1min_before": round(os.getloadavg()[0], 2),
                    "machine_busy_before": None if busy is None else round(busy, 3),
                }
                try:
                    figures = case.measure()
                except Exception as exc:  # one failed run must not lose the others
                    message = f"{type(exc).__name__}: {exc}"
                    print(f"{label}: FAILED: {message}", file=sys.stderr, flush=True)
                    results.append({**base, "error": message})
                    continue
                results.append({**base, **figures})
                print(f"{label}: {summary(figures)}", flush=True)
    except KeyboardInterrupt:
        print("interrupted: processes stopped, databases dropped", file=sys.stderr)
        return results, True
    return results, False


def summary(figures: dict[str, Any]) -> str:
    shown = [
        f"{k} {v:,.0f}" if k.endswith("eps") else f"{k} {v:.2f}"
        for k, v in figures.items()
        if isinstance(v, float) and not isinstance(v, bool)
    ]
    return ", ".join(shown[:8])


def medians(
    runs: Sequence[dict[str, Any]], key_fields: Sequence[str], figures: Sequence[str]
) -> list[dict[str, Any]]:
    """Per case (the values of ``key_fields``), the median of each figure over its good runs."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for run in runs:
        if "error" not in run:
            groups.setdefault(tuple(run[k] for k in key_fields), []).append(run)
    rows = []
    for key, group in groups.items():
        row: dict[str, Any] = dict(zip(key_fields, key, strict=True))
        row["runs"] = len(group)
        for name in figures:
            values = [r[name] for r in group if isinstance(r.get(name), int | float)]
            row[name] = statistics.median(values) if values else None
        rows.append(row)
    return rows


def find(rows: Sequence[dict[str, Any]], **key: Any) -> dict[str, Any] | None:
    for row in rows:
        if all(row.get(k) == v for k, v in key.items()):
            return row
    return None


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def write(
    name: str,
    args: argparse.Namespace,
    settings: dict[str, Any],
    runs: Sequence[dict[str, Any]],
    rows: Sequence[dict[str, Any]],
    interrupted: bool,
    started: float,
    extra: dict[str, Any] | None = None,
) -> Path:
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path: Path = args.out / f"{name}-{stamp}.json"
    report = {
        "benchmark": name,
        "finished_at": stamp,
        "wall_seconds": round(time.monotonic() - started, 1),
        "interrupted": interrupted,
        "settings": {"n": args.n, "runs": args.runs, **settings},
        "machine": machine_info(args.pg_url),
        "code": git_state(),
        "medians": list(rows),
        **(extra or {}),
        "runs": list(runs),
    }
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    return path


def bar_chart(
    path: Path,
    title: str,
    ylabel: str,
    groups: Sequence[str],
    series: dict[str, Sequence[float | None]],
    points: dict[str, Sequence[Sequence[float]]] | None = None,
    log: bool = False,
) -> None:
    """Bars per group (x) and series (colour), labelled with their value; ``points``: each run
    as a dot over its bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6.5, 1.6 * len(groups) * max(1, len(series)) ** 0.5), 4.5))
    for s_index, (label, values) in enumerate(series.items()):
        offset = (s_index - (len(series) - 1) / 2) * width
        xs = [g + offset for g, v in enumerate(values) if v is not None and math.isfinite(v)]
        heights = [v for v in values if v is not None and math.isfinite(v)]
        bars = ax.bar(xs, heights, width * 0.9, label=label)
        ax.bar_label(bars, fmt="%.3g", fontsize=8)
        for g, dots in enumerate((points or {}).get(label, [])):
            ax.scatter([g + offset] * len(dots), dots, color="black", s=8, zorder=3)
    ax.set_xticks(range(len(groups)), list(groups))
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
