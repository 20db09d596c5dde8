"""A herd's direct claim alone, in process: N executions due at one instant, spread over every
shard, their shards opened to the claims (as a leased scheduler opens a herd's), then drained by
C claimers (each a store of its own, as worker processes are) taking B at a time, each batch
finished at once. No scheduler, no handler, no event-loop dynamics: the figure moves with the
claim's SQL and the store's walk only.

``--grace S`` adds the scheduler's grace checks of the herd, every S seconds on a store of their
own, by ``--grace-policy``: ``end`` counts the due rows of every shard of the herd and closes
them all once none is left (the scheduler before "Emptied shards closed at every grace"),
``each`` counts those of the shards still open and closes the emptied ones (after; one
statement, ``shard_lease_grace``, where the store has it: "A herd's grace in one statement";
with older code two, the count then the close). ``end`` needs older code (a store with
``execution_count_due``). Their statements and time are printed. ``--hold-horizon`` keeps a
transaction with a snapshot open in the run's database for the whole drain, as another
session's long transaction does: the claimed rows' index entries then stay heap visits for
every walk of an emptied shard.

Prints, per run, the drain rate, the database's CPU per execution (from /proc) and the claim's
mean wall time per tenth of the herd (does a claim slow down as the shards empty?).

The herd is inserted once into a template database; each run claims from a copy of it. Run
older code the same way with ``PYTHONPATH=<an older src>`` (interleave them).

    python -m bench.direct_claim [--n 100000] [--runs 3] [--batch 64] [--claimers 2]
        [--grace 1.0 --grace-policy each] [--hold-horizon]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

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


async def graces(
    store: Any, leases: list[Any], through: datetime, every: float, policy: str, done: Any
) -> dict[str, float]:
    """The scheduler's grace checks of the herd until every shard is closed (``policy``, see the
    module's docstring): statements sent and their wall time."""
    shards = [g.shard_id for g in leases]
    closed: set[int] = set()
    statements, seconds, checks = 0, 0.0, 0
    while len(closed) < len(shards):
        await asyncio.sleep(every)
        began = time.perf_counter()
        checks += 1
        open_ = [s for s in shards if s not in closed]
        mine = [g for g in leases if g.shard_id not in closed]
        if policy == "each" and hasattr(store, "shard_lease_grace"):
            left, shut = await store.shard_lease_grace("bench", mine, through)
            closed.update(shut)
            statements += 1
        elif policy == "each":  # older code: the count, then the close
            left = await store.execution_count_due(open_, through)
            closed.update(await store.shard_lease_close("bench", mine, through))
            statements += 2
        else:
            left = await store.execution_count_due(shards, through)
            statements += 1
            if not left:
                closed.update(await store.shard_lease_close("bench", leases, through))
                statements += 1
        seconds += time.perf_counter() - began
        if done() and not left and len(closed) < len(shards):
            raise RuntimeError(f"{len(shards) - len(closed)} shards left open after the herd")
    return {
        "grace_checks": float(checks),
        "grace_statements": float(statements),
        "grace_s": seconds,
    }


async def one_run(
    url: str,
    n: int,
    batch: int,
    claimers: int,
    grace: float | None = None,
    policy: str = "end",
    hold: bool = False,
) -> dict[str, float]:
    from tests.factories import T0

    from tickwheel.domain.sharding import SHARD_COUNT
    from tickwheel.domain.states import AttemptStatus, ExecutionStatus
    from tickwheel.store.factory import open_store
    from tickwheel.store.protocol import AttemptResult

    stores = [await open_store(url, pool_size=4) for _ in range(claimers)]
    checker = await open_store(url, pool_size=2) if grace else None
    holder = await psycopg.AsyncConnection.connect(url) if hold else None
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
        if checker is not None and policy == "end" and not hasattr(checker, "execution_count_due"):
            raise SystemExit("--grace-policy end runs older code only (execution_count_due)")
        leases = await stores[0].shard_lease_acquire("bench", SHARD_COUNT, timedelta(hours=1))
        # Every store's pool warm (its hot connections open) before the clock starts.
        await asyncio.gather(*(s.execution_claim_ready("warm", 0, LEASE) for s in stores))
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            cursor = await conn.execute(
                "SELECT pid FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            backends = [int(pid) for (pid,) in await cursor.fetchall()]
            if holder is not None:  # a snapshot held for the whole drain (a long transaction)
                await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                await holder.execute("SELECT count(*) FROM shard_leases")
            through = T0 + timedelta(seconds=5)
            await stores[0].shard_lease_open("bench", leases, through)
            wall, server = time.perf_counter(), _cpu_seconds(backends)
            drained = False
            checks = (
                asyncio.create_task(
                    graces(checker, leases, through, grace, policy, lambda: drained)
                )
                if checker is not None and grace
                else None
            )
            await asyncio.gather(*(drain(i) for i in range(claimers)))
            wall, server = time.perf_counter() - wall, _cpu_seconds(backends) - server
            drained = True
            grace_figures = await checks if checks is not None else {}
    finally:
        if holder is not None:
            await holder.close()
        for store in [*stores, *([checker] if checker is not None else [])]:
            await store.close()
    tenths = [[t for before, t in times if before * 10 // n == k] for k in range(10)]
    figures = {
        "per_s": done / wall,
        "server_us": server / done * 1e6,
        "claims": float(len(times)),
        "rows_per_claim": done / len(times),
        **grace_figures,
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
    parser.add_argument("--grace", type=float, help="seconds between the herd's grace checks")
    parser.add_argument("--grace-policy", choices=["end", "each"], default="each")
    parser.add_argument("--hold-horizon", action="store_true")
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
                one_run(
                    with_database(args.pg_url, name),
                    args.n,
                    args.batch,
                    args.claimers,
                    args.grace,
                    args.grace_policy,
                    args.hold_horizon,
                )
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
        if "grace_checks" in figures:
            print(
                f"  graces ({args.grace_policy}): {figures['grace_checks']:.0f} checks,"
                f" {figures['grace_statements']:.0f} statements,"
                f" {figures['grace_s'] * 1e3:.0f} ms in all",
                flush=True,
            )
    print(
        f"median of {len(runs)}: {statistics.median(r['per_s'] for r in runs):,.0f} per s,"
        f" PostgreSQL {statistics.median(r['server_us'] for r in runs):.0f} µs per execution"
    )


if __name__ == "__main__":
    main()
