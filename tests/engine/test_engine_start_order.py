"""A process with a worker starts it first: the scheduler, the reaper and the webhook sender go
round only once the worker's first round (its first claim) is done, so that their first rounds
(a scheduler's is its shards' leases, a sweep and a window over each) do not hold up the
process's first attempts. They still start when the worker's first round does not come."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tickwheel.config import Settings
from tickwheel.engine.worker import Worker
from tickwheel.server import Engine, in_process
from tickwheel.store.protocol import Store

FIRST_ROUNDS = {"scheduler", "reaper", "webhooks"}  # (the pruner's comes a minute later)


def recorded(engine: Engine, log: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Each service's round as it begins (the worker's: as it ends) in ``log``."""
    for service in engine.services:
        run_once = service.run_once

        if isinstance(service, Worker):

            async def worker_round(run_once: Any = run_once) -> int:
                did: int = await run_once()
                log.append("worker done")
                return did

            monkeypatch.setattr(service, "run_once", worker_round)
        else:

            async def other_round(run_once: Any = run_once, name: str = service.name) -> int:
                log.append(name)
                did: int = await run_once()
                return did

            monkeypatch.setattr(service, "run_once", other_round)


async def test_the_other_services_go_round_after_the_workers_first_round(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = Engine(store, Settings(_env_file=None), scheduler=True, worker=True, leased=True)
    log: list[str] = []
    recorded(engine, log, monkeypatch)
    engine.start()
    try:
        others = [s for s in engine.services if s.name in FIRST_ROUNDS]
        await asyncio.wait_for(asyncio.gather(*(s.wait_rounds(1) for s in others)), 20)
    finally:
        await engine.stop(1)
    assert log[0] == "worker done"
    assert set(log) >= FIRST_ROUNDS


async def test_they_do_not_wait_for_a_worker_whose_first_round_does_not_come(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = Engine(store, Settings(_env_file=None), scheduler=True, worker=True, leased=True)
    assert engine.worker is not None
    stuck = asyncio.Event()

    async def never() -> int:
        await stuck.wait()
        return 0

    monkeypatch.setattr(engine.worker, "run_once", never)
    monkeypatch.setattr(in_process, "FIRST_ROUND_WAIT", 0.05)
    engine.start()
    try:
        others = [s for s in engine.services if s.name in FIRST_ROUNDS]
        await asyncio.wait_for(asyncio.gather(*(s.wait_rounds(1) for s in others)), 20)
        assert engine.worker.rounds == 0
    finally:
        stuck.set()
        await engine.stop(1)
