"""A herd's direct claim alone, in process: N executions due at one instant, spread over every
shard, their shards opened to the claims (as a leased scheduler opens a herd's), then drained by
C claimers (each a store of its own, as worker processes are) taking B at a time, each batch
finished at once. No scheduler, no handler, no event-loop dynamics: the figure moves with the
claim's SQL and the store's walk only.

Prints, per run, the drain rate, the database's CPU per execution (from /proc) and the claim's
mean wall time per tenth of the herd (does a claim slow down as the shards empty?).

The herd is inserted once into a template database; each run claims from a copy of it. Run
older code the same way with ``PYTHONPATH=<an older src>`` (interleave them).

    python -m bench.direct_claim [--n 100000] [--runs 3] [--batch 64] [--claimers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from datetime import timedelta
from pathlib import Path

import psycopg

from bench._common import require_loopback, with_database
from bench.claim_finish import _cpu_seconds
from bench.report import DEFAULT_PG_URL

LEASE = timedelta(seconds=120)


async def fill(url: str, n: int) -> None:
    """The herd, SCHEDULED, due 5 s after the factories' T0 (long past by the database's clock)."""
    from tests.factories import new_execution

    from tickwheel.store.factory import open_store

    store = await open_store(url, pool_size=2)
    try:
        await store.migrate()
        for start in range(0, n, 1000):
            await store.execution_insert_many(
                [new_execution(execute_in=5) for _ in range(min(1000, n - start))]
            )
    finally:
        await store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE executions")


async def one_run(url: str, n: int, batch: int, claimers: int) -> dict[str, float]:
    from tests.factories import T0

    from tickwheel.domain.sharding import SHARD_COUNT
    from tickwheel.domain.states import AttemptStatus, ExecutionStatus
    from tickwheel.store.factory import open_store
    from tickwheel.store.protocol import AttemptResult

    stores = [await open_store(url, pool_size=4) for _ in range(claimers)]
    times: list[tuple[int, float]] = []  # (rows claimed before this claim, its wall seconds)
    done = 0

    async def drain(index: int) -> None:
        nonlocal done
        store = stores[index]
        while True:
            began = time.perf_counter()
            claimed = await store.execution_claim_ready(f"bench-{index}", batch, LEASE)
            times.append((done, time.perf_counter() - began))
            if not claimed:
                return
            done += len(claimed)
            done_ok = (AttemptStatus.SUCCEEDED, ExecutionStatus.SUCCEEDED)
            await store.attempt_finish_many(
                [AttemptResult(e.execution_id, e.fencing_token or 0, *done_ok) for e in claimed]
            )

    try:
        leases = await stores[0].shard_lease_acquire("bench", SHARD_COUNT, timedelta(hours=1))
        # Every store's pool warm (its hot connections open) before the clock starts.
        await asyncio.gather(*(s.execution_claim_ready("warm", 0, LEASE) for s in stores))
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            cursor = await conn.execute(
                "SELECT pid FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            backends = [int(pid) for (pid,) in await cursor.fetchall()]
            await stores[0].shard_lease_open("bench", leases, T0 + timedelta(seconds=5))
            wall, server = time.perf_counter(), _cpu_seconds(backends)
            await asyncio.gather(*(drain(i) for i in range(claimers)))
            wall, server = time.perf_counter() - wall, _cpu_seconds(backends) - server
    finally:
        for store in stores:
            await store.close()
    tenths = [[t for before, t in times if before * 10 // n == k] for k in range(10)]
    figures = {
        "per_s": done / wall,
        "server_us": server / done * 1e6,
        "claims": float(len(times)),
        "rows_per_claim": done / len(times),
    }
    for k, tenth in enumerate(tenths):
        figures[f"ms_{k}"] = statistics.fmean(tenth) * 1e3 if tenth else 0.0
    assert done == n, f"claimed {done} of {n}"
    return figures


def main() -> None:
    import tickwheel

    parser = argparse.ArgumentParser(prog="python -m bench.direct_claim", description=__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--claimers", type=int, default=2)
    parser.add_argument("--template", help="a database filled by an earlier run, kept")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    require_loopback(args.pg_url)
    print(f"tickwheel from {Path(tickwheel.__file__).parent}", flush=True)
    template = args.template or f"tickwheel_bench_herd_{uuid.uuid4().hex[:8]}"
    if not args.template:
        with psycopg.connect(args.pg_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{template}"')
        asyncio.run(fill(with_database(args.pg_url, template), args.n))
        print(f"filled {template} (reuse it with --template {template})", flush=True)
    runs = []
    for number in range(args.runs):
        name = f"tickwheel_bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(args.pg_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        try:
            figures = asyncio.run(
                one_run(with_database(args.pg_url, name), args.n, args.batch, args.claimers)
            )
        finally:
            with psycopg.connect(args.pg_url, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        runs.append(figures)
        tenths = " ".join(f"{figures[f'ms_{k}']:.1f}" for k in range(10))
        print(
            f"run {number + 1}: {figures['per_s']:,.0f} per s, PostgreSQL"
            f" {figures['server_us']:.0f} µs per execution, {figures['rows_per_claim']:.1f} rows"
            f" a claim; ms a claim per tenth: {tenths}",
            flush=True,
        )
    print(
        f"median of {len(runs)}: {statistics.median(r['per_s'] for r in runs):,.0f} per s,"
        f" PostgreSQL {statistics.median(r['server_us'] for r in runs):.0f} µs per execution"
    )


if __name__ == "__main__":
    main()
