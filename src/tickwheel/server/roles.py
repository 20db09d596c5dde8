"""``tickwheel scheduler`` / ``worker`` / ``orchestrator``: the engine's services without the API.

A role process starts claiming as soon as its store is open, so this module imports neither the
web stack (FastAPI, uvicorn) nor the SDK: a worker that imported them spent a second of CPU
before its first claim, a third of a benchmark's drain of 10,000 executions."""

from __future__ import annotations

import asyncio
import gc
import signal

from tickwheel.config import Settings
from tickwheel.server.in_process import Engine
from tickwheel.server.startup import prepare


async def run_roles(
    settings: Settings,
    *,
    scheduler: bool,
    worker: bool,
    worker_id: str | None = None,
    orchestrator: bool = False,
) -> None:
    """Services without the API, until SIGTERM or SIGINT; then running attempts get
    ``shutdown_grace_seconds`` to finish and what is left goes back to READY. (SIGKILL needs
    nothing: the reaper recovers the leases.)"""
    prepared = await prepare(settings, serves_api=False, claims=worker, promotes=scheduler)
    store = prepared.store
    # No API in this process: serve its own metrics (claims, lateness, stale writes...) when asked.
    stop_metrics = None
    if settings.metrics_port:
        from tickwheel.observability.metrics import serve_metrics

        stop_metrics = serve_metrics(settings.metrics_port, settings.host)
    # A worker started with --definitions runs those definitions only: its code is for them.
    engine = Engine(
        store,
        settings,
        scheduler=scheduler,
        worker=worker,
        worker_id=worker_id,
        definition_uris=prepared.definition_uris,
        orchestrator=orchestrator,
        leased=scheduler,
    )
    if stop_metrics is not None:
        from tickwheel.engine.queue_gauges import QueueGauges

        # Its /metrics shows the cluster's queue gauges too, refreshed while it is scraped.
        engine.services.append(QueueGauges(store, every=settings.metrics_gauges_seconds))
    # What the start made (modules, classes, settings, the engine) lives as long as the
    # process: frozen out of the collector's reach, so that its full passes during the work
    # walk only what the work made; and collection resumes (``tickwheel.cli.main`` paused it
    # for the start).
    gc.freeze()
    gc.enable()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        engine.start()
        stopped = asyncio.create_task(stop.wait())
        ended = asyncio.create_task(engine.wait())
        await asyncio.wait([stopped, ended], return_when=asyncio.FIRST_COMPLETED)
        for task in (stopped, ended):
            task.cancel()
        if ended.done() and not ended.cancelled():
            ended.result()
    finally:
        await engine.stop(settings.shutdown_grace_seconds)
        await store.close()
        if stop_metrics is not None:
            stop_metrics()
