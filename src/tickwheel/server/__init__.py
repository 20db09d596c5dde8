"""Composition root of ``tickwheel server``: opens the store, prepares it, and serves the API.

On first start it creates an operator key, prints it once and writes it to a file only the user
can read, so that the README's tour works without any set-up. The engine's services that run
beside the API (or alone, as roles) are put together in ``in_process``."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import uvicorn

from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.app.definitions import DefinitionService
from tickwheel.client.client import AsyncClient
from tickwheel.config import Settings
from tickwheel.domain.clock import SystemClock
from tickwheel.domain.definition_files import format_from_filename, parse_definition
from tickwheel.domain.models import Scope
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.engine.queue_gauges import QueueGauges
from tickwheel.engine.runners.secrets import SecretsFileError
from tickwheel.observability.metrics import serve_metrics
from tickwheel.pyjobs.loading import register_apps
from tickwheel.server.in_process import (
    Engine,
    cron_service,
    worker_secrets,
)
from tickwheel.store.cron_protocol import CronStore
from tickwheel.store.factory import (
    ReadStores,
    cron_store_for,
    open_read_stores,
    open_store,
    redact,
)
from tickwheel.store.protocol import Store

log = logging.getLogger("tickwheel.server")
DEFINITION_SUFFIXES = (".yaml", ".yml", ".json", ".xml")


Announce = Callable[[Settings, "FirstKey | None"], None]


class StartupError(RuntimeError):
    """A reason not to start, worded for the person who started it."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class FirstKey:
    secret: str
    path: Path


async def ensure_admin_key(store: Store, settings: Settings) -> FirstKey | None:
    """Creates the first key when no key exists yet: an operator key of the default tenant,
    because whoever starts the server runs the cluster (and publishes shared definitions)."""
    if await store.api_key_count() > 0:
        return None
    _, secret = await create_key(
        store, settings.tenant, Scope.OPERATOR, "first operator key", SystemClock().now()
    )
    path = Path(settings.admin_key_file)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Created 0600 from the start, so the secret is never readable by others, even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
    os.chmod(path, 0o600)
    return FirstKey(secret, path)


async def load_definitions(
    store: Store, directory: Path, tenant: str, policy: RunPolicy | None = None
) -> list[str]:
    """Publishes every definition file of ``directory`` to the shared registry (the operator's
    act: whoever starts the server runs the cluster) and returns their URIs; a conflict stops
    the start, because serving with a definition other than the one on disk would surprise
    everyone. ``policy`` judges them as registration does (docs/worker_policy.md)."""
    if not directory.is_dir():
        raise StartupError(f"--definitions {directory}: not a directory")
    definitions = DefinitionService(store, tenant)
    loaded: list[str] = []
    for path in sorted(directory.iterdir()):
        if path.suffix.lower() not in DEFINITION_SUFFIXES:
            continue
        try:
            fmt = format_from_filename(path.name)
            definition = parse_definition(path.read_bytes(), fmt, policy=policy)
            written = await definitions.apply(definition, shared=True)
        except Exception as exc:
            raise StartupError(f"definition file {path}: {exc}") from exc
        d = written.value.definition
        log.info(
            "definition %s v%d%s", d.name, d.version, "" if written.created else " (unchanged)"
        )
        loaded.append(d.uri)
    return loaded


@dataclass(frozen=True)
class Prepared:
    store: Store
    first_key: FirstKey | None
    definition_uris: list[str] | None
    """The URIs of the ``--definitions`` folder, when one was given."""


async def prepare(settings: Settings, *, serves_api: bool = True) -> Prepared:
    if settings.insecure_no_auth and not is_loopback(settings.host):
        raise StartupError(
            f"--insecure-no-auth is only allowed on a loopback address, not {settings.host}"
        )
    try:  # a worker with a bad secrets file would fail every attempt that needs a secret
        worker_secrets(settings).check()
    except SecretsFileError as exc:
        raise StartupError(str(exc)) from exc
    store = await open_store(settings.database_url, pool_size=settings.db_pool_size)
    try:
        if store.dialect == "sqlite":
            applied = await store.migrate()
            if applied:
                log.info("applied migrations: %s", ", ".join(applied))
        elif pending := await store.migrations_pending():
            raise StartupError(
                f"the database {redact(settings.database_url)} needs migrations "
                f"{', '.join(pending)}: run 'tickwheel db upgrade' first"
            )
        needs_key = serves_api and not settings.insecure_no_auth
        first_key = await ensure_admin_key(store, settings) if needs_key else None
        uris = None
        if settings.definitions_dir:
            folder = Path(settings.definitions_dir)
            uris = await load_definitions(store, folder, settings.tenant, settings.run_policy())
        if specs := [spec.strip() for spec in settings.apps.split(",") if spec.strip()]:
            try:
                jobs = await register_apps(store, specs, settings.tenant, settings.run_policy())
            except Exception as exc:
                raise StartupError(str(exc)) from exc
            uris = [*(uris or []), *jobs]
    except BaseException:
        await store.close()
        raise
    return Prepared(store, first_key, uris)


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
    prepared = await prepare(settings)
    store, first_key = prepared.store, prepared.first_key
    engine = Engine(store, settings, cron=True, orchestrator=True) if settings.engine else None
    reads: ReadStores | None = None
    try:
        if settings.read_database_url:
            reads = await open_read_stores(settings.read_database_url)
        if announce:
            announce(settings, first_key)
        app = create_app(store, settings, reads=reads)
        config = uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level.lower(),
            # No logging config of uvicorn's own: its records reach the root handler, in the
            # format configure_logging chose (JSON lines off a terminal).
            log_config=None,
            lifespan="off",
        )
        if engine:
            engine.start()
        await _Server(config).serve()
    finally:
        if engine:
            await engine.stop(settings.shutdown_grace_seconds)
        if reads is not None:
            await reads.close()
        await store.close()


async def run_roles(
    settings: Settings,
    *,
    scheduler: bool,
    worker: bool,
    worker_id: str | None = None,
    orchestrator: bool = False,
) -> None:
    """``tickwheel scheduler`` / ``worker`` / ``orchestrator``: services without the API, until
    SIGTERM or SIGINT; then running attempts get ``shutdown_grace_seconds`` to finish and what
    is left goes back to READY. (SIGKILL needs nothing: the reaper recovers the leases.)"""
    prepared = await prepare(settings, serves_api=False)
    store = prepared.store
    # No API in this process: serve its own metrics (claims, lateness, stale writes...) when asked.
    stop_metrics = (
        serve_metrics(settings.metrics_port, settings.host) if settings.metrics_port else None
    )
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
        # Its /metrics shows the cluster's queue gauges too, refreshed while it is scraped.
        engine.services.append(QueueGauges(store, every=settings.metrics_gauges_seconds))
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


def exit_past_stuck_jobs() -> None:
    """Called once everything is shut down. A sync job thread that ignored its timeout cannot be
    stopped, and the interpreter would wait for it at exit (forever, for a hung job); its
    execution has already been released or reaped, so leave without it."""
    stuck = [
        t for t in threading.enumerate() if t.name.startswith("tickwheel-job") and t.is_alive()
    ]
    for thread in stuck:
        thread.join(0.1)
    if any(t.is_alive() for t in stuck):
        log.warning("exiting with %d job thread(s) still running", len(stuck))
        logging.shutdown()
        os._exit(0)


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
