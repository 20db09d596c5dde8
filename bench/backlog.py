"""B4 backlog: B2 (drain) and B3 (herd) on an empty database and again on one that already stores
a backlog of future executions (default 10,000,000), and the ratio between the two — a claim or
a promotion should not touch rows that are not due, so the ratio should stay near 1.

The backlog lives in a dedicated database (``tickwheel_bench_backlog`` by default) that is kept
between sessions: loading it is the slow part. It is loaded again only when it holds another
number of rows, when its earliest row would be due within an hour, or with ``--reload``. Each run
deletes its own executions (tenant ``default``) afterwards; the backlog (tenant ``backlog``)
stays. ``--drop-backlog`` removes the database and exits.

Loading: valid rows of the real schema, written by PostgreSQL COPY (the secondary indexes of
``executions`` are dropped first and rebuilt after, as one would for a bulk load): UUIDv7 ids,
each row's shard the engine's own ``shard_id`` of its id, ``executeAt`` spread at random over
90 days from a week ahead, its minute bucket, status SCHEDULED, a registered definition."""

from __future__ import annotations

import argparse
import asyncio
import random
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from bench import report, suite
from bench._common import child_env, tickwheel_executable, with_database
from bench.systems import run_checked
from bench.workloads import DRAIN_FIGURES, HERD_FIGURES

BACKLOG_TENANT = "backlog"
CHUNK = 50_000
# From a week ahead (the database stays usable for a week), over the next three months.
FIRST_DUE_IN = timedelta(days=7)
SPREAD = timedelta(days=90)
NOT_DUE_WITHIN = timedelta(hours=1)
COLUMNS = (
    "execution_id, tenant, definition_uri, definition_version, input_snapshot, execute_at,"
    " bucket_start, shard_id, status, priority, attempt_count, max_attempts, created_at,"
    " updated_at"
)
DEFINITION = """\
name: backlog
version: 1
description: The future executions stored before B4 runs (never due during a run).
execution:
  type: python
  entrypoint: bench.jobs_tickwheel:noop
retry:
  maxAttempts: 1
"""


def uuid7(ms: int, rand: int) -> uuid.UUID:
    """RFC 9562 version 7: 48 bits of milliseconds, then version, variant and random bits."""
    value = (ms << 80) | (0x7 << 76) | ((rand >> 62) & 0xFFF) << 64 | (0b10 << 62)
    return uuid.UUID(int=value | (rand & ((1 << 62) - 1)))


def rows_text(count: int, start_ms: int, first: datetime, rng: random.Random) -> bytes:
    from tickwheel.domain.sharding import shard_id

    created = datetime.now(UTC).isoformat()
    spread_s = SPREAD.total_seconds()
    lines = []
    for i in range(count):
        execution_id = uuid7(start_ms + i // 4096, rng.getrandbits(74))
        at = first + timedelta(seconds=rng.random() * spread_s)
        bucket = at.replace(second=0, microsecond=0)
        lines.append(
            f"{execution_id}\t{BACKLOG_TENANT}\tregistry://jobs/backlog\t1\t{{}}\t"
            f"{at.isoformat()}\t{bucket.isoformat()}\t{shard_id(execution_id)}\tSCHEDULED\t0\t0\t1"
            f"\t{created}\t{created}\n"
        )
    return "".join(lines).encode()


def backlog_state(url: str) -> tuple[int, datetime | None]:
    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('bench_backlog')").fetchone()
        if exists is None or exists[0] is None:
            return 0, None
        row = conn.execute("SELECT rows, earliest FROM bench_backlog").fetchone()
        return (0, None) if row is None else (int(row[0]), row[1])


def ensure_backlog(pg_url: str, db_name: str, rows: int, reload: bool) -> dict[str, Any]:
    """The backlog database, migrated and holding ``rows`` future executions; says whether it
    was loaded now and how long that took."""
    admin_url, url = with_database(pg_url, "postgres"), with_database(pg_url, db_name)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db_name,)).fetchone():
            pass
        else:
            admin.execute(f'CREATE DATABASE "{db_name}"')
    env = child_env(TICKWHEEL_LOG_LEVEL="warning")
    run_checked([str(tickwheel_executable()), "db", "upgrade", "--database-url", url],
                env=env, cwd=Path.cwd(), what="tickwheel db upgrade (backlog)")  # fmt: skip
    stored, earliest = backlog_state(url)
    fresh = earliest is not None and earliest > datetime.now(UTC) + NOT_DUE_WITHIN
    if stored == rows and fresh and not reload:
        return {"database": db_name, "rows": rows, "loaded_now": False, "earliest": earliest}
    print(f"loading a backlog of {rows:,} future executions into {db_name} ...", flush=True)
    started = time.monotonic()
    load(url, rows)
    seconds = time.monotonic() - started
    print(f"loaded in {seconds:.0f} s", flush=True)
    stored, earliest = backlog_state(url)
    return {"database": db_name, "rows": stored, "loaded_now": True, "load_seconds": seconds,
            "earliest": earliest}  # fmt: skip


def load(url: str, rows: int) -> None:
    asyncio.run(register_definition(url))
    first = (datetime.now(UTC) + FIRST_DUE_IN).replace(microsecond=0)
    rng = random.Random(20261129)
    # One transaction (DDL included): a load cut short leaves the database as it was, never
    # a table without its indexes; the marker row is written last.
    with psycopg.connect(url) as conn, conn.transaction():
        conn.execute("DROP TABLE IF EXISTS bench_backlog")
        conn.execute("TRUNCATE executions CASCADE")
        # Secondary indexes only: the primary key and the idempotency-key constraint stay.
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'executions'"
            " AND indexname NOT IN (SELECT conname FROM pg_constraint"
            "   WHERE conrelid = 'executions'::regclass)"
        ).fetchall()
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        start_ms = int(time.time() * 1000)
        with conn.cursor() as cur, cur.copy(f"COPY executions ({COLUMNS}) FROM STDIN") as copy:
            for done in range(0, rows, CHUNK):
                count = min(CHUNK, rows - done)
                copy.write(rows_text(count, start_ms + done // 4096, first, rng))
                if (done // CHUNK) % 20 == 19:
                    print(f"  {done + count:,} rows", flush=True)
        conn.execute("SET LOCAL maintenance_work_mem = '512MB'")
        for _, definition in indexes:
            conn.execute(definition)
        conn.execute(
            "CREATE TABLE bench_backlog (rows bigint, earliest timestamptz, loaded_at timestamptz)"
        )
        conn.execute(
            "INSERT INTO bench_backlog SELECT count(*), min(execute_at), now() FROM executions"
            " WHERE tenant = %s",
            (BACKLOG_TENANT,),
        )
    with psycopg.connect(url, autocommit=True) as conn:
        # Sets the visibility map once, so that the runs' own VACUUMs skip the backlog's pages.
        conn.execute("VACUUM (ANALYZE) executions")


async def register_definition(url: str) -> None:
    from tickwheel import AsyncClient
    from tickwheel.client.transports.inprocess import InProcessTransport
    from tickwheel.store.factory import open_store

    store = await open_store(url, pool_size=1)
    try:
        async with AsyncClient(transport=InProcessTransport(store, BACKLOG_TENANT)) as client:
            await client.apply_definition(DEFINITION, "yaml", shared=True)
    finally:
        await store.close()


def ratios(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Backlog ÷ empty, oriented so that 1 means no change and below 1 worse: throughput as is,
    times inverted (empty's seconds ÷ backlog's)."""
    out = []
    for r in rows:
        if r["database"] != "backlog":
            continue
        empty = report.find(rows, database="empty", workload=r["workload"], workers=r["workers"])
        if empty is None:
            continue
        if r["workload"] == "drain":
            figs = {f: report.ratio(r[f], empty[f]) for f in ("drain_eps", "steady_eps")}
        else:
            figs = {f: report.ratio(empty[f], r[f])
                    for f in ("all_ready_s", "all_started_s", "lateness_p99_s")}  # fmt: skip
        out.append({"workload": r["workload"], "workers": r["workers"], **figs})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench b4", description=__doc__)
    report.add_common(parser, n=100_000)
    suite.add_engine_options(parser)
    parser.add_argument("--backlog", type=int, default=10_000_000, help="future executions stored")
    parser.add_argument("--backlog-db", default="tickwheel_bench_backlog")
    parser.add_argument("--reload", action="store_true", help="load the backlog again")
    parser.add_argument("--drop-backlog", action="store_true", help="drop its database and exit")
    parser.add_argument(
        "--load-only", action="store_true", help="make sure the backlog is loaded, then exit"
    )
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="drain")
    parser.add_argument("--herd-workers", type=int, nargs="+", default=[2], help="herd")
    args = parser.parse_args(argv)
    report.check_common(parser, args)
    if args.drop_backlog:
        with psycopg.connect(with_database(args.pg_url, "postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{args.backlog_db}" WITH (FORCE)')
        print(f"dropped {args.backlog_db}")
        return 0
    started = time.monotonic()
    backlog = ensure_backlog(args.pg_url, args.backlog_db, args.backlog, args.reload)
    if args.load_only:
        print(backlog)
        return 0
    backlog_url = with_database(args.pg_url, args.backlog_db)
    todo = [
        *suite.cases(["tickwheel"], args.workers, args.herd_workers, args.n, suite.config(args),
                     database="empty"),
        *suite.cases(["tickwheel"], args.workers, args.herd_workers, args.n,
                     suite.config(args, database_url=backlog_url), database="backlog"),
    ]  # fmt: skip
    runs, interrupted = report.repeat(todo, args.runs, args.quiet_wait)
    key = ["database", "workload", "system", "workers"]
    rows = report.medians([r for r in runs if r["workload"] == "drain"], key, DRAIN_FIGURES)
    rows += report.medians([r for r in runs if r["workload"] == "herd"], key, HERD_FIGURES)
    extra: dict[str, Any] = {"backlog": backlog, "ratios_backlog_over_empty": ratios(rows)}
    settings = {"backlog_rows": args.backlog, "worker_concurrency": args.concurrency,
                "drain_workers": args.workers, "herd_workers": args.herd_workers}  # fmt: skip
    path = report.write("b4-backlog", args, settings, runs, rows, interrupted, started, extra)
    suite.charts(path.with_suffix(""), f"B4 backlog of {args.backlog:,} vs empty", rows, runs,
                 "database")  # fmt: skip
    print()
    print(suite.table(rows, ["database", "workload", "workers"]))
    for r in extra["ratios_backlog_over_empty"]:
        shown = ", ".join(f"{k} {v:.2f}" for k, v in r.items() if isinstance(v, float))
        print(f"backlog/empty {r['workload']} W={r['workers']}: {shown}")
    print(path)
    return 130 if interrupted else 1 if any("error" in r for r in runs) else 0
