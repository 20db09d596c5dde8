"""The engine's services as tasks of one process: the scheduler, reaper, webhook sender and
pruner, a worker, and the Cron Service and the orchestrator, each of these two with an in-process
client per tenant (they are built on the client, never on the engine)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from tickwheel.config import Settings
from tickwheel.engine.runners.secrets import Secrets
from tickwheel.engine.service import Service
from tickwheel.store.factory import cron_store_for, webhook_store_for, workflow_store_for
from tickwheel.store.protocol import Store

if TYPE_CHECKING:
    from tickwheel.client.client import AsyncClient
    from tickwheel.cron.service import ClientFor, CronService
    from tickwheel.engine.worker import Worker
    from tickwheel.store.cron_protocol import CronStore
    from tickwheel.workflows.orchestrator import Orchestrator

# The services are imported where a process builds them: a worker needs neither the scheduler
# nor the client (its HTTP stack and resource models) that the Cron Service and the
# orchestrator are built on, and its first claim waits for every import before it.


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
            from tickwheel.engine.pruner import Pruner
            from tickwheel.engine.reaper import Reaper
            from tickwheel.engine.scheduler import Scheduler
            from tickwheel.engine.webhooks import WebhookSender

            # Leased: the role process shares the shards with other schedulers; the all-in-one
            # server is the only scheduler of its database and promotes over every shard.
            promoter = Scheduler(store, leased=leased, settings=settings.scheduler_settings())
            # One reaper of several processes: the one beside the scheduler running the passes.
            reaper = Reaper(store, runs=lambda: promoter.runs_passes)
            self.services += [promoter, reaper]
            # Webhook deliveries beside the scheduler: any number of senders share the outbox
            # (leased claims), under the same destination rules as http executions.
            self.services.append(
                WebhookSender(webhook_store_for(store), policy=settings.run_policy())
            )
            pruning = settings.pruner_settings()
            if pruning is not None:  # retention beside the scheduler, hourly
                # (It finds the cron tables' store at its first pass, a minute after the start.)
                self.services.append(Pruner(store, settings=pruning))
        if worker:
            from tickwheel.engine.runners import default_runners
            from tickwheel.engine.worker import Worker

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
                definition_uris=definition_uris,
                settings=settings.worker_settings(),
            )
            self.services.append(self.worker)
            if scheduler:
                # The worker reads ahead the definitions of what the scheduler loads.
                promoter.definitions_ahead = self.worker.prefetch_definitions
                # An instant's next promotions wait for the worker's first claim to come back.
                promoter.claim_back = self.worker.claim_back
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        worker = self.worker
        if worker is None:
            self._tasks = [asyncio.create_task(s.run(), name=s.name) for s in self.services]
        else:
            # The worker first, the others once its first round is done (or FIRST_ROUND_WAIT
            # passed): its first claim takes only READY work, which needs no promotion, while
            # a scheduler's first round (its shards' leases, a sweep and a window over each of
            # them) is tens of milliseconds of this loop's time that the first claim's
            # attempts would otherwise wait behind, a process's start being mostly that.
            first = asyncio.create_task(worker.run(), name=worker.name)
            self._tasks = [first] + [
                asyncio.create_task(_after_first_round(worker, s), name=s.name)
                for s in self.services
                if s is not worker
            ]
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


FIRST_ROUND_WAIT = 0.5
"""Seconds the other services of a process with a worker wait, at most, for its first round."""


async def _after_first_round(worker: Worker, service: Service) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(worker.wait_rounds(1), FIRST_ROUND_WAIT)
    await service.run()


def worker_secrets(settings: Settings) -> Secrets:
    """Where this process's workers find secrets: the environment, then the secrets file."""
    return Secrets(file=settings.secrets_file)


def in_process_cron(store: Store, settings: Settings) -> CronService:
    """The Cron Service inside ``tickwheel server``: it serves every tenant, each through an
    in-process client bound to that tenant, so occurrences obey the API's rules exactly."""
    return cron_service(cron_store_for(store), tenant_clients(store, settings), settings, None)


def in_process_orchestrator(store: Store, settings: Settings) -> Orchestrator:
    """The workflow orchestrator inside ``tickwheel server`` (or ``tickwheel orchestrator``):
    every tenant's runs, each through an in-process client bound to that tenant."""
    from tickwheel.workflows.orchestrator import Orchestrator

    return Orchestrator(
        workflow_store_for(store),
        store,
        tenant_clients(store, settings),
        settings=settings.orchestrator_settings(),
    )


def tenant_clients(store: Store, settings: Settings) -> ClientFor:
    """One in-process client per tenant, made on first use. Its ``client.workflows`` starts
    workflow runs in process too (the Cron Service's workflow-targeted jobs)."""
    from tickwheel.api.inprocess_workflows import InProcessWorkflowsTransport
    from tickwheel.client.client import AsyncClient
    from tickwheel.client.transports.inprocess import InProcessTransport

    clients: dict[str, AsyncClient] = {}
    workflows = workflow_store_for(store)

    def client_for(tenant: str) -> AsyncClient:
        if tenant not in clients:
            transport = InProcessTransport(store, tenant, limits=settings.submit_limits())
            runs = InProcessWorkflowsTransport(workflows, transport)
            clients[tenant] = AsyncClient(transport=transport, workflows_transport=runs)
        return clients[tenant]

    return client_for


def cron_service(
    cron: CronStore, client_for: ClientFor, settings: Settings, tenant: str | None
) -> CronService:
    from tickwheel.cron.service import CronService

    return CronService(
        cron,
        client_for,
        tenant=tenant,
        settings=settings.cron_settings(),
    )
