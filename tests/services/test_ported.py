"""The Cron Service and the orchestrator run on the shared service base: an outage of their
database (the store raising ``Unavailable``) is backed off and outlived, not fatal. The stores
here are doubles that fail a set number of times; the pauses advance a fake clock."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any, cast

import pytest

from tickwheel.client.client import AsyncClient
from tickwheel.cron.service import CronService
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.errors import Unavailable
from tickwheel.engine.service import Service as EngineService
from tickwheel.services.base import Service
from tickwheel.store.cron_protocol import CronStore
from tickwheel.store.protocol import Store, Topic
from tickwheel.store.workflow_protocol import WorkflowStore
from tickwheel.workflows.orchestrator import Orchestrator

OUTAGE = 4


class Flaky:
    """Fails ``OUTAGE`` claims with ``Unavailable``, then claims nothing and stops the service."""

    def __init__(self) -> None:
        self.calls = 0
        self.service: Service | None = None

    def _claim(self) -> None:
        self.calls += 1
        if self.calls <= OUTAGE:
            raise Unavailable("the database is restarting")
        assert self.service is not None
        self.service.stop()

    async def cron_job_claim_due(self, *args: Any) -> Any:
        self._claim()
        return type("Claim", (), {"jobs": [], "now": None})()

    async def workflow_event_claim(self, *args: Any) -> list[Any]:
        self._claim()
        return []

    async def workflow_run_list_stalled(self, *args: Any) -> list[Any]:
        return []

    async def wait_for(self, topic: Topic, timeout: float) -> bool:
        return False

    async def cron_job_next_due(self, *args: Any) -> None:
        return None

    async def cron_wait(self, timeout: float) -> bool:
        return False


def no_client(tenant: str) -> AsyncClient:
    raise AssertionError("no client is needed while the database is down")


def fake_pauses(service: Service, clock: FakeClock) -> list[float]:
    pauses: list[float] = []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)
        await clock.sleep(seconds)

    service.pause = pause  # type: ignore[method-assign]
    return pauses


def test_the_engine_cron_and_orchestrator_share_one_base() -> None:
    assert issubclass(CronService, Service) and issubclass(Orchestrator, Service)
    assert EngineService is Service


@pytest.mark.parametrize("kind", ["cron", "orchestrator"])
async def test_an_outage_is_outlived_with_back_off_and_logged_once(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock, store = FakeClock(), Flaky()
    service: Service
    if kind == "cron":
        service = CronService(cast(CronStore, store), no_client, clock=clock)
    else:
        service = Orchestrator(
            cast(WorkflowStore, store), cast(Store, store), no_client, clock=clock
        )
    store.service = service
    service.random.seed(3)
    pauses = fake_pauses(service, clock)
    start = clock.now()
    with caplog.at_level(logging.INFO, logger=f"tickwheel.{service.name}"):
        await asyncio.wait_for(service.run(), 5)
    assert store.calls == OUTAGE + 1
    backoffs = [p for p in pauses if p >= 0.8 and p != getattr(service, "poll", None)]
    assert len(backoffs) >= OUTAGE and backoffs[OUTAGE - 1] >= 0.8 * 2 ** (OUTAGE - 1)
    assert clock.now() - start >= timedelta(seconds=0.8 * (1 + 2 + 4 + 8))
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
    assert any(f"back after {OUTAGE} failed rounds" in r.getMessage() for r in caplog.records)
