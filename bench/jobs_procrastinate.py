"""The Procrastinate app of B5 (``procrastinate --app bench.jobs_procrastinate.app worker``).
The database comes from ``BENCH_PROCRASTINATE_DSN``: the worker processes and the benchmark
build the same app, each with the run's own database."""

from __future__ import annotations

import os
from typing import Any

import procrastinate

from bench.journal import record

DSN_ENV = "BENCH_PROCRASTINATE_DSN"


def make_app(dsn: str) -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop", pass_context=True)
    async def noop(context: Any) -> None:
        record(f"p{context.job.id}")

    return app


app = make_app(os.environ.get(DSN_ENV, ""))
