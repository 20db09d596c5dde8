"""``tickwheel server``: the API (FastAPI under uvicorn) with the engine beside it, and
``tickwheel cron run``, which materialises occurrences through the HTTP API."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import uvicorn
from starlette.types import ASGIApp

from tickwheel.api.app import create_app
from tickwheel.client.client import AsyncClient
from tickwheel.config import Settings
from tickwheel.server.in_process import Engine, cron_service
from tickwheel.server.startup import FirstKey, StartupError, prepare
from tickwheel.store.cron_protocol import CronStore
from tickwheel.store.factory import ReadStores, cron_store_for, open_read_stores

log = logging.getLogger("tickwheel.server")

Announce = Callable[[Settings, "FirstKey | None"], None]
T = TypeVar("T")


def run_on_fast_loop(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on uvloop's event loop, where uvloop is installed (not on Windows). The
    loop is most of the API server's own CPU per request after the handlers: its waits for the
    database's sockets and its transports, about a fifth less CPU per submit on uvloop. uvicorn
    picks uvloop only for a loop it makes itself; ``serve`` runs on the caller's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


async def serve(settings: Settings, announce: Announce | None = None) -> None:
    """Runs until interrupted; ``announce`` tells the person at the terminal what started.
    With the engine on (the default), the scheduler, the reaper and a worker run beside the API
    in this one process; SIGTERM stops the API, then lets running attempts finish."""
    # The engine runs a worker and a scheduler.
    prepared = await prepare(settings, claims=settings.engine, promotes=settings.engine)
    store, first_key = prepared.store, prepared.first_key
    engine = Engine(store, settings, cron=True, orchestrator=True) if settings.engine else None
    reads: ReadStores | None = None
    try:
        if settings.read_database_url:
            reads = await open_read_stores(settings.read_database_url)
        if announce:
            announce(settings, first_key)
        config = uvicorn_config(create_app(store, settings, reads=reads), settings)
        if engine:
            engine.start()
        await _Server(config).serve()
    finally:
        if engine:
            await engine.stop(settings.shutdown_grace_seconds)
        if reads is not None:
            await reads.close()
        await store.close()


def uvicorn_config(app: ASGIApp, settings: Settings) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        # No logging config of uvicorn's own: its records reach the root handler, in the
        # format configure_logging chose (JSON lines off a terminal).
        log_config=None,
        # A line per request, formatted and written as it ends, was about a tenth of the
        # server's CPU per single submit (B1 at the default level "info"): only on request
        # (TICKWHEEL_ACCESS_LOG); the request metrics count every request by route and
        # status, and errors are logged either way.
        access_log=settings.access_log,
        lifespan="off",
    )


class _Server(uvicorn.Server):
    """uvicorn re-raises a captured SIGTERM after its own shutdown, which would kill the process
    before our cleanup (engine stop, store close) runs. Capture the signals without that."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


async def run_cron(settings: Settings, url: str, api_key: str | None, tenant: str) -> None:
    """``tickwheel cron run``: the Cron Service alone, for one tenant. It claims that tenant's
    due cron jobs from its own tables (``--database-url``) and materialises occurrences through
    the HTTP API with ``api_key``, which must belong to the same tenant. Any number may run
    against one PostgreSQL; SIGKILL needs nothing (the claims expire and others take over)."""
    store = (await prepare(settings, serves_api=False)).store
    cron = cron_store_for(store)
    client = AsyncClient(url, api_key)
    try:
        await _check_tenant(cron, client, tenant)

        def client_for(job_tenant: str) -> AsyncClient:
            assert job_tenant == tenant, "claims are filtered by tenant"
            return client

        service = cron_service(cron, client_for, settings, tenant)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, service.stop)
        await service.run()
    finally:
        await client.close()
        await store.close()


async def _check_tenant(cron: CronStore, client: AsyncClient, tenant: str) -> None:
    """Executions go to the API key's tenant: refuse to run if that is not ``tenant``, judged
    by whether the API and the database list the same cron jobs for it."""
    stored = [j.name for j in await cron.cron_job_list(tenant, None, 5)]
    seen = [j.name for j in (await client.cron.list(limit=5)).items]
    if stored != seen:
        raise StartupError(
            f"the API key does not seem to belong to tenant {tenant!r} (the API lists cron jobs "
            f"{seen or 'none'}, the database {stored or 'none'}): pass --tenant or another key"
        )
    if not stored:
        log.warning("tenant %r has no cron jobs yet: cannot check the API key's tenant", tenant)
