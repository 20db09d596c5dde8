"""Composition root of ``tickwheel server``: opens the store, prepares it, and serves the API.

On first start it creates an operator key, prints it once and writes it to a file only the user
can read, so that the README's tour works without any set-up."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import uvicorn

from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.api.inprocess_workflows import InProcessWorkflowsTransport
from tickwheel.app.definitions import DefinitionService
from tickwheel.client.client import AsyncClient
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.config import Settings
from tickwheel.cron.service import ClientFor, CronService
from tickwheel.domain.clock import SystemClock
from tickwheel.domain.definition_files import format_from_filename, parse_definition
from tickwheel.domain.models import Scope
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.engine.pruner import Pruner
from tickwheel.engine.queue_gauges import QueueGauges
from tickwheel.engine.reaper import Reaper
from tickwheel.engine.runners import default_runners
from tickwheel.engine.runners.secrets import Secrets, SecretsFileError
from tickwheel.engine.scheduler import Scheduler
from tickwheel.engine.service import Service
from tickwheel.engine.worker import Worker
from tickwheel.observability.metrics import serve_metrics
from tickwheel.store.cron_protocol import CronStore
from tickwheel.store.factory import cron_store_for, open_store, redact, workflow_store_for
from tickwheel.store.protocol import Store
from tickwheel.workflows.orchestrator import Orchestrator

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
    except BaseException:
        await store.close()
        raise
    return Prepared(store, first_key, uris)


async def serve(settings: Settings, announce: Announce | None = None) -> None:
    """Runs until interrupted; ``announce`` tells the person at the terminal what started.
    With the engine on (the default), the scheduler, the reaper and a worker run beside the API
    in this one process; SIGTERM stops the API, then lets running attempts finish."""
    prepared = await prepare(settings)
    store, first_key = prepared.store, prepared.first_key
    engine = Engine(store, settings, cron=True, orchestrator=True) if settings.engine else None
    try:
        if announce:
            announce(settings, first_key)
        app = create_app(store, settings)
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


class Engine:
    """Scheduler, reaper and worker (and the Cron Service and the orchestrator, which are built
    on the client, not on the engine) as tasks of one process."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        scheduler: bool = True,
        worker: bool = True,
        worker_id: str | None = None,
        definition_uris: list[str] | None = None,
        cron: bool = False,
        orchestrator: bool = False,
        leased: bool = False,
    ) -> None:
        self.services: list[Service] = []
        self.worker: Worker | None = None
        self.cron = in_process_cron(store, settings) if cron else None
        self.orchestrator = in_process_orchestrator(store, settings) if orchestrator else None
        if scheduler:
            # Leased: the role process shares the shards with other schedulers; the all-in-one
            # server is the only scheduler of its database and promotes over every shard.
            promoter = Scheduler(
                store,
                leased=leased,
                lease_ttl=settings.shard_lease_seconds,
                window=settings.wheel_window_seconds,
            )
            self.services += [promoter, Reaper(store)]
            if settings.retention_days > 0:  # retention beside the scheduler, hourly
                retention = timedelta(days=settings.retention_days)
                self.services.append(Pruner(store, retention=retention, cron=cron_store_for(store)))
        if worker:
            # Job threads for every slot plus as many again for sync jobs stuck past their
            # timeout (as the Worker's own default); every runner applies the run policy.
            runners = default_runners(
                max_threads=2 * settings.worker_concurrency,
                policy=settings.run_policy(),
                secrets=worker_secrets(settings),
            )
            self.worker = Worker(
                store,
                worker_id=worker_id,
                runners=runners,
                concurrency=settings.worker_concurrency,
                lease=timedelta(seconds=settings.lease_seconds),
                definition_uris=definition_uris,
                max_inline_output=settings.max_inline_output_bytes,
                finish_batch=settings.worker_finish_batch,
                finish_interval=settings.worker_finish_interval,
                cancel_grace=settings.cancel_grace_seconds,
            )
            self.services.append(self.worker)
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(s.run(), name=s.name) for s in self.services]
        for extra in (self.cron, self.orchestrator):
            if extra is not None:
                self._tasks.append(asyncio.create_task(extra.run(), name=extra.name))

    async def wait(self) -> None:
        """Until a service ends (it only does when stopped, or on a bug: then raise it)."""
        done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()

    async def stop(self, grace: float) -> None:
        for service in self.services:
            service.stop()
        for extra in (self.cron, self.orchestrator):
            if extra is not None:
                extra.stop()
        if self.worker is not None:
            await self.worker.shutdown(grace)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def worker_secrets(settings: Settings) -> Secrets:
    """Where this process's workers find secrets: the environment, then the secrets file."""
    return Secrets(file=settings.secrets_file)


def in_process_cron(store: Store, settings: Settings) -> CronService:
    """The Cron Service inside ``tickwheel server``: it serves every tenant, each through an
    in-process client bound to that tenant, so occurrences obey the API's rules exactly."""
    return _cron_service(cron_store_for(store), tenant_clients(store, settings), settings, None)


def in_process_orchestrator(store: Store, settings: Settings) -> Orchestrator:
    """The workflow orchestrator inside ``tickwheel server`` (or ``tickwheel orchestrator``):
    every tenant's runs, each through an in-process client bound to that tenant."""
    stall = timedelta(seconds=settings.workflow_stall_seconds)
    return Orchestrator(
        workflow_store_for(store),
        store,
        tenant_clients(store, settings),
        lease=timedelta(seconds=settings.orchestrator_claim_seconds),
        stall_grace=stall,
        sweep_every=stall,
    )


def tenant_clients(store: Store, settings: Settings) -> ClientFor:
    """One in-process client per tenant, made on first use. Its ``client.workflows`` starts
    workflow runs in process too (the Cron Service's workflow-targeted jobs)."""
    clients: dict[str, AsyncClient] = {}
    workflows = workflow_store_for(store)

    def client_for(tenant: str) -> AsyncClient:
        if tenant not in clients:
            transport = InProcessTransport(store, tenant, limits=settings.submit_limits())
            runs = InProcessWorkflowsTransport(workflows, transport)
            clients[tenant] = AsyncClient(transport=transport, workflows_transport=runs)
        return clients[tenant]

    return client_for


def _cron_service(
    cron: CronStore, client_for: ClientFor, settings: Settings, tenant: str | None
) -> CronService:
    return CronService(
        cron,
        client_for,
        tenant=tenant,
        lead=timedelta(seconds=settings.cron_lead_seconds),
        grace=timedelta(seconds=settings.cron_misfire_grace_seconds),
        lease=timedelta(seconds=settings.cron_claim_seconds),
    )


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

        service = _cron_service(cron, client_for, settings, tenant)
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
