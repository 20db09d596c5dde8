"""``cron apply`` of a file that changes and prunes thousands of jobs, in process, on a fresh
PostgreSQL database (or SQLite file) per run: N jobs applied, then the same file with 30% of
the jobs on another schedule, 30% left out (``--prune`` deletes them) and 5% new; the second
apply is timed. It uses only what ``CronJobs.cron_apply`` took before its updates and deletes
were batched, so ``PYTHONPATH=<older src>:. python -m bench.cron_apply`` measures the older
code the same way (run them interleaved on a noisy machine).

    python -m bench.cron_apply [--n 10000] [--runs 3] [--backend postgresql|sqlite]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from bench._common import require_loopback, with_database
from bench.report import DEFAULT_PG_URL


def declared(names: list[str], expression: str) -> list[dict[str, Any]]:
    return [
        {"name": n, "definitionUri": "greet", "expression": expression, "inputs": {"name": "Ada"}}
        for n in names
    ]


async def one_run(url: str, n: int) -> dict[str, float]:
    from tests.factories import definition, stored

    import tickwheel
    from tickwheel.cron.jobs import CronJobs
    from tickwheel.store.factory import cron_store_for, open_store

    print(f"  tickwheel from {Path(tickwheel.__file__).parent}", flush=True)
    store = await open_store(url, pool_size=4)
    try:
        await store.migrate()
        await store.definition_insert(stored(definition()))
        jobs = CronJobs(cron_store_for(store), store, "acme", "bench")
        names = [f"job-{i:06}" for i in range(n)]
        await jobs.cron_apply(declared(names, "0 2 * * *"), True, False, "bench")
        kept, changed = names[: int(n * 0.4)], names[int(n * 0.4) : int(n * 0.7)]
        new = [f"new-{i:06}" for i in range(int(n * 0.05))]
        docs = declared(kept + new, "0 2 * * *") + declared(changed, "0 3 * * *")
        started = time.perf_counter()
        result = await jobs.cron_apply(docs, True, False, "bench")
        seconds = time.perf_counter() - started
        summary = result["summary"]
        expected = {"create": len(new), "update": len(changed), "unchanged": len(kept)}
        if any(summary[k] != v for k, v in expected.items()) or summary["delete"] != n * 0.3:
            raise RuntimeError(f"unexpected plan: {summary}")
        changes = summary["update"] + summary["delete"]
        return {"seconds": seconds, "changes_per_s": changes / seconds}
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cron_apply", description=__doc__)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backend", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    require_loopback(args.pg_url)
    seconds = []
    for number in range(args.runs):
        if args.backend == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                figures = asyncio.run(one_run(f"sqlite:///{tmp}/bench.db", args.n))
        else:
            name = f"tickwheel_bench_{uuid.uuid4().hex[:12]}"
            with psycopg.connect(args.pg_url, autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{name}"')
            try:
                figures = asyncio.run(one_run(with_database(args.pg_url, name), args.n))
            finally:
                with psycopg.connect(args.pg_url, autocommit=True) as admin:
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        seconds.append(figures["seconds"])
        print(
            f"run {number + 1}: {figures['seconds']:.2f} s "
            f"({figures['changes_per_s']:,.0f} updates and deletes/s)",
            flush=True,
        )
    print(f"median of {len(seconds)}: {statistics.median(seconds):.2f} s")


if __name__ == "__main__":
    main()
