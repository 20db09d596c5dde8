"""B1 submit: executions/s stored through each way in, N executions due now per run, each with
its own idempotency key, on a fresh database per way and run (no scheduler or worker running):

- ``http_single``: ``POST /v1/executions``, one execution per request (``--concurrency``
  requests in flight on one connection pool);
- ``http_batch``: ``POST /v1/executions/batch``, 1,000 per request (bench/e2e.py's submitter);
- ``sdk_single`` / ``sdk_batch``: the Python SDK in-process (``AsyncClient`` on an
  ``InProcessTransport`` over the store, as the Cron Service and the orchestrator use it):
  ``submit`` one at a time, and ``submit_many`` 1,000 at a time."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from bench import e2e, report
from bench.systems import BENCH_TENANT, TickwheelSystem, definition_yaml

MODES = ("http_single", "http_batch", "sdk_single", "sdk_batch")
BATCH = 1000


def measure(mode: str, n: int, backend: str, pg_url: str, concurrency: int) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tickwheel-bench-")))
        system = TickwheelSystem(stack, tmp, tmp / "journal", pg_url=pg_url, backend=backend)
        seconds = submit_through(system, mode, n, concurrency)
        ready = system.db.counts().get("READY", 0)
        if ready != n:
            raise RuntimeError(f"expected {n} READY executions, found {ready}")
        return {"submit_seconds": seconds, "submit_eps": n / seconds}


def submit_through(system: TickwheelSystem, mode: str, n: int, concurrency: int) -> float:
    """Seconds to store ``n`` executions due now (keys unique to the mode) through ``mode``."""
    if mode == "http_single":
        return asyncio.run(http_single(system.base_url, system.api_key, n, concurrency))
    if mode == "http_batch":
        return system.submit(n, None)
    return asyncio.run(sdk(system.db.url, n, batch=mode == "sdk_batch"))


async def http_single(base_url: str, api_key: str, n: int, concurrency: int) -> float:
    body = {"definitionUri": e2e.DEFINITION_URI, "inputs": {}}
    headers = {"Authorization": f"Bearer {api_key}"}
    keys = iter(range(n))

    async def sender(http: httpx.AsyncClient) -> None:
        for i in keys:
            response = await http.post(
                "/v1/executions", json=body, headers={"Idempotency-Key": f"b1-single-{i}"}
            )
            if response.status_code != 201:
                raise RuntimeError(f"submit: HTTP {response.status_code}: {response.text[:300]}")

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=base_url, headers=headers, timeout=60.0, limits=limits
    ) as http:
        started = time.perf_counter()
        await asyncio.gather(*(sender(http) for _ in range(concurrency)))
        return time.perf_counter() - started


async def sdk(database_url: str, n: int, *, batch: bool, size: int = BATCH) -> float:
    """The SDK in this process, straight on the store: no HTTP, no server."""
    from tickwheel import AsyncClient, SubmitRequest
    from tickwheel.client.transports.inprocess import InProcessTransport
    from tickwheel.store.factory import open_store

    store = await open_store(database_url, pool_size=2)
    try:
        async with AsyncClient(transport=InProcessTransport(store, BENCH_TENANT)) as client:
            await client.apply_definition(definition_yaml(), "yaml", shared=True)
            way = "batch" if batch else "single"
            requests = [
                SubmitRequest(definition_uri="noop", idempotency_key=f"b1-sdk-{way}-{i}")
                for i in range(n)
            ]
            started = time.perf_counter()
            if batch:
                for start in range(0, n, size):
                    results = await client.submit_many(requests[start : start + size])
                    if any(r.status != 201 for r in results):
                        raise RuntimeError(f"submit_many: statuses {[r.status for r in results]}")
            else:
                for r in requests:
                    await client.submit(r.definition_uri, idempotency_key=r.idempotency_key)
            return time.perf_counter() - started
    finally:
        await store.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench b1", description=__doc__)
    report.add_common(parser, n=20_000)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--backend", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument(
        "--concurrency", type=int, default=4, help="http_single: requests in flight at once"
    )
    args = parser.parse_args(argv)
    report.check_common(parser, args)
    started = time.monotonic()
    cases = [
        report.Case(
            {"mode": mode},
            functools.partial(measure, mode, args.n, args.backend, args.pg_url, args.concurrency),
        )
        for mode in args.modes
    ]
    runs, interrupted = report.repeat(cases, args.runs, args.quiet_wait)
    rows = report.medians(runs, ["mode"], ["submit_eps"])
    path = report.write(
        "b1-submit", args,
        {"backend": args.backend, "modes": args.modes, "http_single_concurrency": args.concurrency,
         "batch_size": BATCH},
        runs, rows, interrupted, started,
    )  # fmt: skip
    modes = [m for m in args.modes if report.find(rows, mode=m)]
    if modes:
        report.bar_chart(
            path.with_suffix(".png"),
            f"B1 submit: {args.n:,} executions per run, {args.backend} (bars: median)",
            "executions stored / s",
            modes,
            {"tickwheel": [report.find(rows, mode=m)["submit_eps"] for m in modes]},  # type: ignore[index]
            {
                "tickwheel": [
                    [r["submit_eps"] for r in runs if r.get("mode") == m and "error" not in r]
                    for m in modes
                ]
            },
        )
    for row in rows:
        print(f"{row['mode']:<12} {row['submit_eps']:>10,.0f} executions/s  ({row['runs']} runs)")
    print(path)
    return 130 if interrupted else 1 if any("error" in r for r in runs) else 0
