"""The worker's store calls alone, in process: N READY executions claimed 16 at a time, each batch
finished at once (no handler, no event-loop dynamics), on a fresh PostgreSQL database per run.
Prints the client's and the database's CPU per execution (from /proc), each run and the median.

The batches are fixed, so the figure moves only with the code: ``PYTHONPATH=<an older src>
python -m bench.claim_finish`` measures the older code the same way (run them interleaved).

    python -m bench.claim_finish [--n 5000] [--runs 3] [--batch 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from datetime import timedelta
from pathlib import Path

import psycopg

from bench._common import require_loopback, with_database
from bench.report import DEFAULT_PG_URL

WARM_UP = 20
"""Claims before the measure: the hot pool's connections open, psycopg prepares statements."""


def _cpu_seconds(pids: list[int]) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


async def one_run(url: str, n: int, batch: int) -> tuple[float, float]:
    from tests.factories import new_execution

    import tickwheel
    from tickwheel.domain.states import AttemptStatus, ExecutionStatus
    from tickwheel.store.factory import open_store
    from tickwheel.store.protocol import AttemptResult

    print(f"  tickwheel from {Path(tickwheel.__file__).parent}", flush=True)
    store = await open_store(url, pool_size=4)
    lease = timedelta(seconds=60)

    async def claim_and_finish() -> int:
        claimed = await store.execution_claim_ready("bench", batch, lease)
        results = [
            AttemptResult(e.execution_id, e.fencing_token or 0, AttemptStatus.SUCCEEDED,
                          ExecutionStatus.SUCCEEDED)
            for e in claimed
        ]  # fmt: skip
        if results:
            await store.attempt_finish_many(results)
        return len(claimed)

    try:
        await store.migrate()
        items = [new_execution() for _ in range(n + WARM_UP * batch)]
        for start in range(0, len(items), 1000):
            await store.execution_insert_many(items[start : start + 1000])
        for _ in range(WARM_UP):
            await claim_and_finish()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            cursor = await conn.execute(
                "SELECT pid FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            backends = [int(pid) for (pid,) in await cursor.fetchall()]
            client, server = time.process_time(), _cpu_seconds(backends)
            done = 0
            while did := await claim_and_finish():
                done += did
            client, server = time.process_time() - client, _cpu_seconds(backends) - server
        return client / done * 1e6, server / done * 1e6
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.claim_finish", description=__doc__)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    require_loopback(args.pg_url)
    clients, servers = [], []
    for number in range(args.runs):
        name = f"tickwheel_bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(args.pg_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        try:
            url = with_database(args.pg_url, name)
            client, server = asyncio.run(one_run(url, args.n, args.batch))
        finally:
            with psycopg.connect(args.pg_url, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        clients.append(client)
        servers.append(server)
        print(f"run {number + 1}: client {client:.1f} µs, PostgreSQL {server:.1f} µs per execution",
              flush=True)  # fmt: skip
    print(
        f"median of {len(clients)}: client {statistics.median(clients):.1f} µs,"
        f" PostgreSQL {statistics.median(servers):.1f} µs per execution"
    )


if __name__ == "__main__":
    main()
