"""The Cron Service's materialisation throughput alone, in process: N every-minute jobs all due
at one boundary, one ``CronService`` on a fake clock ticking until every job is materialised,
through an in-process client (no HTTP, no other process), on a fresh PostgreSQL database or
SQLite file per run. Prints occurrences materialised per second, each run and the median.

It uses only what the Cron Service had before issue 18 (``cron_job_insert``, ``run_once``), so
``PYTHONPATH=<an older src> python -m bench.cron_tick`` measures the older code the same way:
a before/after ratio from one session on a noisy machine (run them interleaved).

    python -m bench.cron_tick [--n 5000] [--runs 3] [--backend postgresql|sqlite] [--batch 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

from bench._common import require_loopback, with_database
from bench.report import DEFAULT_PG_URL
from tickwheel.services.settings import CronSettings

BOUNDARY = datetime(2026, 3, 1, 12, 1, tzinfo=UTC)


async def one_run(url: str, n: int, batch: int) -> float:
    from tests.factories import definition, stored

    import tickwheel
    from tickwheel.client.client import AsyncClient
    from tickwheel.client.transports.inprocess import InProcessTransport
    from tickwheel.cron.service import CronService
    from tickwheel.domain.clock import FakeClock
    from tickwheel.domain.cron_jobs import (
        AuditAction,
        AuditEntry,
        CronJob,
        CronJobSpec,
        CronJobStatus,
    )
    from tickwheel.store.factory import cron_store_for, open_store

    print(f"  tickwheel from {Path(tickwheel.__file__).parent}", flush=True)
    store = await open_store(url, pool_size=4)
    try:
        await store.migrate()
        await store.definition_insert(stored(definition()))
        cron = cron_store_for(store)
        at = BOUNDARY - timedelta(seconds=60)
        for i in range(n):
            spec = CronJobSpec(
                name=f"job-{i:06}", definition_uri="greet", expression="* * * * *",
                inputs={"name": "Ada"},
            )  # fmt: skip
            job = CronJob(uuid.uuid4(), "acme", spec, CronJobStatus.ACTIVE, BOUNDARY, 1, at, at)
            audit = AuditEntry(
                "acme", job.cron_job_id, spec.name, AuditAction.CREATED, "b", at, None, None
            )
            await cron.cron_job_insert(job, audit)
        clock = FakeClock(BOUNDARY - timedelta(seconds=30))
        client = AsyncClient(transport=InProcessTransport(store, "acme", clock), clock=clock)
        service = CronService(
            cron,
            lambda _: client,
            clock=clock,
            settings=CronSettings(lead=timedelta(seconds=60), batch=batch),
        )
        started = time.perf_counter()
        done = 0
        while did := await service.run_once():
            done += did
        seconds = time.perf_counter() - started
        if done != n:
            raise RuntimeError(f"advanced {done} jobs, expected {n}")
        return n / seconds
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cron_tick", description=__doc__)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--backend", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    require_loopback(args.pg_url)
    rates = []
    for number in range(args.runs):
        if args.backend == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                rate = asyncio.run(one_run(f"sqlite:///{tmp}/bench.db", args.n, args.batch))
        else:
            name = f"tickwheel_bench_{uuid.uuid4().hex[:12]}"
            with psycopg.connect(args.pg_url, autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{name}"')
            try:
                rate = asyncio.run(one_run(with_database(args.pg_url, name), args.n, args.batch))
            finally:
                with psycopg.connect(args.pg_url, autocommit=True) as admin:
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        rates.append(rate)
        print(f"run {number + 1}: {rate:,.0f} occurrences/s", flush=True)
    print(f"median of {len(rates)}: {statistics.median(rates):,.0f} occurrences/s")


if __name__ == "__main__":
    main()
