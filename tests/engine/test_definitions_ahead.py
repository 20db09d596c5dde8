"""The definitions of what is due soon, read before the instant: the due window returns each
row's definition, the scheduler hands those of the rows it loads into its wheel to a worker of
its process, and the worker's definition cache reads them then, so that a herd's first attempt
finds its definition cached instead of reading it after its claim. On both backends, on the
fake clock."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any, cast

import pytest

from tests.engine.recording import RecordingStore
from tests.factories import T0, definition, new_execution, stored
from tickwheel.config import Settings
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.states import ExecutionStatus
from tickwheel.engine.definition_cache import DefinitionCache
from tickwheel.engine.scheduler import Scheduler
from tickwheel.engine.worker import Worker
from tickwheel.observability.metrics import Metrics
from tickwheel.server import Engine
from tickwheel.services.settings import WorkerSettings
from tickwheel.store.due import DueSlice
from tickwheel.store.protocol import Store

GREET = ("acme", "registry://jobs/greet", 1)


class Lookups(RecordingStore):
    """The store, with a record of each definition read (when, by the fake clock)."""

    def __init__(self, store: Store, clock: FakeClock, fail: int = 0) -> None:
        super().__init__(store)
        self.clock = clock
        self.reads: list[tuple[str, object]] = []
        self.fail = fail

    async def definition_get(self, tenant: str, name: str, version: int | None = None) -> Any:
        self.reads.append((name, self.clock.now()))
        if self.fail:
            self.fail -= 1
            raise ConnectionError("the database went away")
        return await self.store.definition_get(tenant, name, version)


@pytest.fixture(autouse=True)
async def listening(store: Store) -> None:
    """On PostgreSQL, LISTEN in effect before the scheduler subscribes to due hints."""
    listen = getattr(store, "listen", None)
    if listen is not None:
        assert await listen(5)


async def insert(store: Store, clock: FakeClock, n: int, delay: float) -> list[uuid.UUID]:
    items = [
        new_execution(execute_in=delay, now=clock.now(), key=uuid.uuid4().hex) for _ in range(n)
    ]
    return [o.execution.execution_id for o in await store.execution_insert_many(items)]


async def settled(cache: DefinitionCache) -> None:
    """Until the cache's reads in flight are done (each ends in its done callback)."""
    while cache._lookups:
        await asyncio.gather(*cache._lookups.values(), return_exceptions=True)
        await asyncio.sleep(0)


async def test_the_due_window_returns_each_rows_definition(store: Store) -> None:
    clock = FakeClock(T0)
    ids = await insert(store, clock, 3, 5.0)
    slices = [DueSlice(shard, T0, T0 + timedelta(seconds=10)) for shard in range(1024)]
    pages = await store.execution_due_window(slices, 10)
    rows = [row for page in pages for row in page]
    assert sorted(r.execution_id for r in rows) == sorted(ids)
    assert {r.definition for r in rows} == {GREET}


async def test_a_worker_beside_the_scheduler_has_the_instants_definition_before_it(
    store: Store,
) -> None:
    """A herd inserted 5 s ahead: its hints load it into the wheel, and the worker of the same
    process reads its definition then. Armed and fired at the instant, claimed and run, the
    herd needs no other read of it."""
    assert await store.definition_insert(stored(definition()))
    clock = FakeClock(T0)
    lookups = Lookups(store, clock)
    s = Scheduler(cast(Store, lookups), clock)
    s.metrics = Metrics()
    worker = Worker(
        cast(Store, lookups), clock, worker_id="w1", settings=WorkerSettings(concurrency=20)
    )
    s.definitions_ahead = worker.prefetch_definitions
    await s.run_once()  # the window is loaded, empty: nothing to read
    await settled(worker.definitions)
    assert lookups.reads == []
    ids = await insert(store, clock, 20, 5.0)
    await s.run_once()  # the hints: the herd is in the wheel, its definition being read
    await settled(worker.definitions)
    instant = T0 + timedelta(seconds=5)
    clock.set(instant - timedelta(milliseconds=30))
    assert s.arm(clock.now()) == 20
    assert lookups.reads == [("greet", T0)]
    assert worker.definitions.warm([GREET]) == 0  # cached: nothing more to read
    first = await store.execution_get("acme", ids[0])
    assert first is not None and worker.definitions.known(first) is not None
    assert first.status is ExecutionStatus.SCHEDULED
    clock.set(instant)
    assert await s.run_once() == 20
    assert await worker.run_once() == 20
    await worker.drain()
    assert worker.finished == 20 and lookups.reads == [("greet", T0)]


async def test_a_read_ahead_that_fails_is_not_kept(store: Store) -> None:
    """A failed read caches nothing: the attempt that needs the definition reads it again."""
    assert await store.definition_insert(stored(definition()))
    clock = FakeClock(T0)
    lookups = Lookups(store, clock, fail=1)
    cache = DefinitionCache(cast(Store, lookups))
    assert cache.warm([GREET, GREET]) == 1  # one read per definition
    await settled(cache)
    [execution] = [o.execution for o in await store.execution_insert_many([new_execution()])]
    assert cache.known(execution) is None
    got = await cache.get(execution)
    assert got is not None and got.name == "greet" and len(lookups.reads) == 2
    assert cache.warm([GREET]) == 0


async def test_a_worker_reads_ahead_only_the_definitions_it_runs(store: Store) -> None:
    clock = FakeClock(T0)
    lookups = Lookups(store, clock)
    worker = Worker(
        cast(Store, lookups), clock, worker_id="w1", definition_uris=["registry://jobs/other"]
    )
    worker.prefetch_definitions([GREET])
    await settled(worker.definitions)
    assert lookups.reads == []


async def test_the_engine_wires_the_read_ahead_only_with_a_worker(store: Store) -> None:
    both = Engine(store, Settings(_env_file=None), scheduler=True, worker=True, leased=True)
    alone = Engine(store, Settings(_env_file=None), scheduler=True, worker=False, leased=True)
    [s] = [s for s in both.services if isinstance(s, Scheduler)]
    assert both.worker is not None
    assert s.definitions_ahead == both.worker.prefetch_definitions
    [s] = [s for s in alone.services if isinstance(s, Scheduler)]
    assert s.definitions_ahead is None
