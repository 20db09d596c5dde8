"""The PgQueuer app of B5 (``python -m bench.jobs_pgqueuer``: ``pgqueuer.run(create)``, what
``pgq run bench.jobs_pgqueuer:create`` does; the 1.6 CLI fails on its own default log level
with the typer installed beside it): one asyncpg connection to
the run's database (``BENCH_PGQUEUER_DSN``) and the ``noop`` entrypoint, which notes its start
in the journal. PgQueuer's defaults otherwise (batch size 10, LISTEN/NOTIFY, jobs deleted at
acknowledgement and logged in ``pgqueuer_log``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

import asyncpg
import pgqueuer
from pgqueuer import Job, PgQueuer

from bench.journal import record

DSN_ENV = "BENCH_PGQUEUER_DSN"
ENTRYPOINT = "noop"


@contextlib.asynccontextmanager
async def create() -> AsyncIterator[PgQueuer]:
    connection = await asyncpg.connect(os.environ[DSN_ENV])
    pgq = PgQueuer.from_asyncpg_connection(connection)

    @pgq.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        record(f"q{job.id}")

    try:
        yield pgq
    finally:
        await connection.close()


if __name__ == "__main__":
    asyncio.run(pgqueuer.run(create))
