"""B1 submit: executions/s stored through each way in, N executions due now per run, each with
its own idempotency key, on a fresh database per way and run (no scheduler or worker running):

- ``http_single``: ``POST /v1/executions``, one execution per request (``--concurrency``
  requests in flight on as many kept-alive connections);
- ``http_batch``: ``POST /v1/executions/batch``, 1,000 per request (bench/e2e.py's submitter);
- ``http_batch_minimal``: the same requests with ``Prefer: return=minimal``, answered with each
  item's status and id instead of the whole execution (one client, one request at a time);
- ``sdk_single`` / ``sdk_batch``: the Python SDK in-process (``AsyncClient`` on an
  ``InProcessTransport`` over the store, as the Cron Service and the orchestrator use it):
  ``submit`` one at a time, and ``submit_many`` 1,000 at a time, answered by default with
  receipts (``answer="ids"``: each item's status and id, as PgQueuer's batch enqueue returns a
  list of ids); ``--batch-answer full`` measures the answer with whole executions.

On two cores the client and the server share the machine, so executions/s alone says as much
about the client as about the server: each HTTP run also reports the server process's CPU per
execution (``server_cpu_us``, its user and system time from ``/proc``) and, on PostgreSQL, that
of the database's backends serving it (``db_cpu_us``). ``--client raw`` sends the very requests
httpx builds (same method, path, headers and body bytes), written on kept-alive sockets by
hand: httpx's own layers cost the client about as much CPU per request as the server spends."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench import e2e, report
from bench.systems import BENCH_TENANT, TickwheelSystem, definition_yaml

MODES = ("http_single", "http_batch", "http_batch_minimal", "sdk_single", "sdk_batch")
CLIENTS = ("httpx", "raw")
BATCH = 1000
TICK_US = 1e6 / os.sysconf("SC_CLK_TCK")


def measure(
    mode: str,
    n: int,
    backend: str,
    pg_url: str,
    concurrency: int,
    client: str = "httpx",
    answer: str = "ids",
) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tickwheel-bench-")))
        system = TickwheelSystem(stack, tmp, tmp / "journal", pg_url=pg_url, backend=backend)
        cpu = CpuMeter(system)
        seconds = submit_through(system, mode, n, concurrency, client, answer)
        server_us, db_us = cpu.spent()
        ready = system.db.counts().get("READY", 0)
        if ready != n:
            raise RuntimeError(f"expected {n} READY executions, found {ready}")
        figures: dict[str, Any] = {"submit_seconds": seconds, "submit_eps": n / seconds}
        if mode.startswith("http"):
            figures["server_cpu_us"] = server_us / n
            if db_us is not None:
                figures["db_cpu_us"] = db_us / n
        return figures


def submit_through(
    system: TickwheelSystem,
    mode: str,
    n: int,
    concurrency: int,
    client: str = "httpx",
    answer: str = "ids",
) -> float:
    """Seconds to store ``n`` executions due now (keys unique to the mode) through ``mode``."""
    if mode == "http_single":
        run = http_single_raw if client == "raw" else http_single
        return asyncio.run(run(system.base_url, system.api_key, n, concurrency))
    if mode == "http_batch":
        return system.submit(n, None)
    if mode == "http_batch_minimal":
        return asyncio.run(http_batch_minimal(system.base_url, system.api_key, n))
    return asyncio.run(sdk(system.db.url, n, batch=mode == "sdk_batch", answer=answer))


class CpuMeter:
    """The CPU time (user + system, from ``/proc``) of the server process and, on PostgreSQL,
    of the backends connected to its database, from now to ``spent``. A backend that connects
    in between counts from its start."""

    def __init__(self, system: TickwheelSystem) -> None:
        self.server = system.procs.children[0].popen.pid
        self.url = system.db.url if system.db.backend == "postgresql" else None
        self.start_server = _cpu_us(self.server) or 0.0
        self.start_db = {pid: _cpu_us(pid) or 0.0 for pid in self._backends()}

    def _backends(self) -> list[int]:
        if self.url is None:
            return []
        with psycopg.connect(self.url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        return [int(pid) for (pid,) in rows]

    def spent(self) -> tuple[float, float | None]:
        """Microseconds of the server and of the database's backends (None: not PostgreSQL, or
        their ``/proc`` is not readable from here)."""
        server = (_cpu_us(self.server) or 0.0) - self.start_server
        if self.url is None:
            return server, None
        ends = {pid: _cpu_us(pid) for pid in self._backends()}
        if not ends or any(v is None for v in ends.values()):
            return server, None
        db = sum((v or 0.0) - self.start_db.get(pid, 0.0) for pid, v in ends.items())
        return server, db


def _cpu_us(pid: int) -> float | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces: the fields after its closing parenthesis.
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) * TICK_US  # utime, stime


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


async def http_batch_minimal(base_url: str, api_key: str, n: int, size: int = BATCH) -> float:
    """``n`` due now in requests of ``size`` asking for ``Prefer: return=minimal``, one at a
    time; the bodies are built before the clock starts."""
    headers = {"Authorization": f"Bearer {api_key}", "Prefer": "return=minimal"}
    batches = [
        {
            "items": [
                {"definitionUri": e2e.DEFINITION_URI, "inputs": {}, "idempotencyKey": f"b1-m-{i}"}
                for i in range(start, min(start + size, n))
            ]
        }
        for start in range(0, n, size)
    ]
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=300.0) as http:
        started = time.perf_counter()
        for batch in batches:
            response = await http.post("/v1/executions/batch", json=batch)
            if response.status_code != 200 or "preference-applied" not in response.headers:
                raise RuntimeError(f"batch: HTTP {response.status_code}: {response.text[:300]}")
            if any(item["status"] != 201 for item in response.json()["items"]):
                raise RuntimeError(f"batch: {response.text[:300]}")
        return time.perf_counter() - started


async def http_single_raw(base_url: str, api_key: str, n: int, concurrency: int) -> float:
    """``http_single``'s requests, built by the same httpx client before the clock starts and
    written as HTTP/1.1 on ``concurrency`` kept-alive connections, one request in flight on
    each: only the bytes on the wire, none of httpx's per-request layers, are timed."""
    body = {"definitionUri": e2e.DEFINITION_URI, "inputs": {}}
    headers = {"Authorization": f"Bearer {api_key}"}
    url = httpx.URL(base_url)
    async with httpx.AsyncClient(base_url=base_url, headers=headers) as http:
        wire = [
            _http11(http.build_request("POST", "/v1/executions", json=body, headers=key))
            for key in ({"Idempotency-Key": f"b1-single-{i}"} for i in range(n))
        ]
    pending = iter(wire)
    assert url.host and url.port

    async def sender() -> None:
        reader, writer = await asyncio.open_connection(url.host, url.port)
        try:
            for request in pending:
                writer.write(request)
                status, text = await _response(reader)
                if status != 201:
                    raise RuntimeError(f"submit: HTTP {status}: {text[:300]!r}")
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(concurrency)))
    return time.perf_counter() - started


def _http11(request: httpx.Request) -> bytes:
    target = request.url.raw_path
    head = [request.method.encode() + b" " + target + b" HTTP/1.1"]
    head += [name + b": " + value for name, value in request.headers.raw]
    return b"\r\n".join(head) + b"\r\n\r\n" + request.read()


async def _response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One response's status and body; its length from ``content-length`` (the server sends
    one with every JSON answer; anything else is refused here rather than misread)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
        elif name.strip().lower() == b"transfer-encoding":
            raise RuntimeError(f"unexpected transfer-encoding: {value.strip()!r}")
    if length is None:
        raise RuntimeError("a response without content-length")
    return status, await reader.readexactly(length)


async def sdk(
    database_url: str, n: int, *, batch: bool, size: int = BATCH, answer: str = "ids"
) -> float:
    """The SDK in this process, straight on the store: no HTTP, no server. ``answer``: the
    batches' (``submit_many(..., answer=)``): receipts, as PgQueuer's enqueue returns ids, or
    ``full`` results with the whole executions."""
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
                    part = requests[start : start + size]
                    if answer == "ids":
                        results: Sequence[Any] = await client.submit_many(part, answer="ids")
                    else:
                        results = await client.submit_many(part)
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
    parser.add_argument(
        "--client", choices=CLIENTS, default="httpx",
        help="http_single: httpx's AsyncClient, or the same requests written raw (see above)",
    )  # fmt: skip
    parser.add_argument(
        "--batch-answer", choices=("ids", "full"), default="ids",
        help="sdk_batch: submit_many answered with receipts (ids) or whole executions (full)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    report.check_common(parser, args)
    started = time.monotonic()
    cases = [
        report.Case(
            {"mode": mode},
            functools.partial(
                measure,
                mode,
                args.n,
                args.backend,
                args.pg_url,
                args.concurrency,
                args.client,
                args.batch_answer,
            ),
        )
        for mode in args.modes
    ]
    runs, interrupted = report.repeat(cases, args.runs, args.quiet_wait)
    rows = report.medians(runs, ["mode"], ["submit_eps", "server_cpu_us", "db_cpu_us"])
    path = report.write(
        "b1-submit", args,
        {"backend": args.backend, "modes": args.modes, "http_single_concurrency": args.concurrency,
         "http_single_client": args.client, "batch_size": BATCH,
         "sdk_batch_answer": args.batch_answer},
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
        cpu = "".join(
            f"  {name} {row[name]:,.0f} µs/execution"
            for name in ("server_cpu_us", "db_cpu_us")
            if row.get(name) is not None
        )
        eps = row["submit_eps"]
        print(f"{row['mode']:<12} {eps:>10,.0f} executions/s{cpu}  ({row['runs']} runs)")
    print(path)
    return 130 if interrupted else 1 if any("error" in r for r in runs) else 0
