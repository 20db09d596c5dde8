"""The worker runs an execution with the definition its own tenant resolves (issue 12: tenant
``acme`` registered ``victim`` v2 and ``default``'s next submission ran acme's code with
default's inputs). Real store (both backends), real worker, fake clock."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from tests.factories import T0, stored
from tickwheel.api.auth import create_key
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.definitions import definition_from_document
from tickwheel.domain.errors import Conflict, Forbidden, InvalidInput
from tickwheel.domain.models import Scope
from tickwheel.domain.submission import SubmitRequest
from tickwheel.engine.reaper import Reaper
from tickwheel.engine.worker import Worker
from tickwheel.store.protocol import SHARED, Store

JOBS = "tests.engine.jobs_for_tests"


def victim(version: int, entrypoint: str, retry_on: list[str] | None = None) -> Any:
    retry: dict[str, Any] = {"maxAttempts": 3, "baseDelay": 1, "maxDelay": 5}
    if retry_on is not None:
        retry["retryOn"] = retry_on
    return definition_from_document(
        {
            "name": "victim",
            "version": version,
            "inputs": {"a": "integer", "b": "integer"},
            "outputs": {"sum": "integer"},
            "execution": {"type": "python", "entrypoint": f"{JOBS}:{entrypoint}"},
            "timeout": 5,
            "retry": retry,
        }
    )


async def submit(client: InProcessTransport, version: int | None = None) -> uuid.UUID:
    request = SubmitRequest(
        "registry://jobs/victim", {"a": 20, "b": 22}, definition_version=version
    )
    wire, _ = await client.submit(request)
    return uuid.UUID(str(wire["executionId"]))


async def run_all(store: Store, clock: FakeClock) -> None:
    worker = Worker(store, clock, worker_id="w1")
    assert await worker.run_once() > 0
    await worker.drain()


async def test_another_tenants_new_version_never_runs_for_default(store: Store) -> None:
    clock = FakeClock(T0)
    default = InProcessTransport(store, "default", clock)
    acme = InProcessTransport(store, "acme", clock)
    await default.apply_definition(victim(1, "add"))
    _, created = await acme.apply_definition(victim(2, "product"))
    assert created  # acme's own "victim", which only acme resolves
    eid = await submit(default)
    got = await default.get(eid)
    assert got["definitionVersion"] == 1
    with pytest.raises(InvalidInput):
        await submit(default, version=2)  # acme's version is not default's to pin either
    await run_all(store, clock)
    got = await default.get(eid)
    assert (got["status"], got["output"]) == ("SUCCEEDED", {"sum": 42})  # default's code


async def test_the_worker_resolves_each_execution_for_its_own_tenant(store: Store) -> None:
    """Both tenants own ``victim`` v1 with different code: same uri, same pinned version, and
    each execution runs its own tenant's (the worker's cache is per tenant too)."""
    clock = FakeClock(T0)
    default = InProcessTransport(store, "default", clock)
    acme = InProcessTransport(store, "acme", clock)
    await default.apply_definition(victim(1, "add"))
    await acme.apply_definition(victim(1, "product"))
    ran_default = await submit(default)
    ran_acme = await submit(acme)
    await run_all(store, clock)
    assert (await default.get(ran_default))["output"] == {"sum": 42}
    assert (await acme.get(ran_acme))["output"] == {"sum": 440}


async def test_a_shared_name_is_reserved_and_runs_the_shared_code(store: Store) -> None:
    clock = FakeClock(T0)
    assert await store.definition_insert(stored(victim(1, "add"), owner=SHARED))
    acme = InProcessTransport(store, "acme", clock)
    with pytest.raises(Conflict, match="victim is a shared definition; choose another name"):
        await acme.apply_definition(victim(2, "product"))
    default = InProcessTransport(store, "default", clock)
    eid = await submit(default)
    await run_all(store, clock)
    got = await default.get(eid)
    assert (got["definitionVersion"], got["output"]) == (1, {"sum": 42})


async def test_the_reaper_applies_the_retry_policy_of_the_executions_own_tenant(
    store: Store,
) -> None:
    """Same name, same version, two owners: a lost attempt of default's execution is retried
    (its definition retries ``lost``), acme's is not (its definition does not)."""
    clock = FakeClock(T0)
    default = InProcessTransport(store, "default", clock)
    acme = InProcessTransport(store, "acme", clock)
    await default.apply_definition(victim(1, "add", retry_on=["lost"]))
    await acme.apply_definition(victim(1, "add", retry_on=["error"]))
    retried, dead = await submit(default), await submit(acme)
    claimed = await store.execution_claim_ready("zombie", 2, timedelta(seconds=30), clock.now())
    assert len(claimed) == 2
    clock.advance(31)
    assert await Reaper(store, clock, uniform=lambda low, high: high).run_once() == 2
    assert (await default.get(retried))["status"] == "RETRY_WAIT"
    assert (await acme.get(dead))["status"] == "FAILED"


async def test_the_shared_owner_is_no_tenant(store: Store) -> None:
    """'' owns the shared registry: no key has it as its tenant, and an in-process transport
    bound to it does not write shared definitions unless asked to publish."""
    with pytest.raises(ValueError, match="tenant"):
        await create_key(store, " ", Scope.ADMIN, "nobody", T0)
    nameless = InProcessTransport(store, SHARED, FakeClock(T0))
    with pytest.raises(Forbidden):
        await nameless.apply_definition(victim(1, "add"))
    assert await store.definition_get(SHARED, "victim") is None
    _, created = await nameless.apply_definition(victim(1, "add"), shared=True)
    assert created
