"""Scheduler, worker and reaper against a real store (SQLite and PostgreSQL), driven by a fake
clock through ``run_once``: exact timings, no sleeping on time."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.factories import T0, stored
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.definitions import definition_from_document
from tickwheel.domain.states import AttemptStatus, ExecutionStatus
from tickwheel.domain.submission import SubmitRequest
from tickwheel.engine.reaper import Reaper
from tickwheel.engine.scheduler import Scheduler
from tickwheel.engine.worker import Worker
from tickwheel.store.protocol import Store

JOBS = "tests.engine.jobs_for_tests"


def top(low: float, high: float) -> float:
    return high


async def register(store: Store, name: str, entrypoint: str, **extra: Any) -> None:
    doc: dict[str, Any] = {
        "name": name,
        "version": 1,
        "inputs": {"a": {"type": "integer", "default": 1}, "b": {"type": "integer", "default": 2}},
        "outputs": {"sum": "integer"},
        "execution": {"type": "python", "entrypoint": f"{JOBS}:{entrypoint}"},
        "timeout": 5,
        "retry": {"maxAttempts": 3, "baseDelay": 2, "maxDelay": 60},
    }
    doc.update(extra)
    assert await store.definition_insert(stored(definition_from_document(doc)))


class Rig:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.clock = FakeClock(T0)
        self.client = InProcessTransport(store, "acme", self.clock)
        self.scheduler = Scheduler(store, self.clock)
        self.worker = Worker(store, self.clock, worker_id="w1", uniform=top)
        self.reaper = Reaper(store, self.clock, uniform=top)

    async def submit(self, name: str, delay: float | None = None, **inputs: Any) -> str:
        at = self.clock.now() + timedelta(seconds=delay) if delay is not None else None
        wire, _ = await self.client.submit(
            SubmitRequest(f"registry://jobs/{name}", inputs=inputs, execute_at=at)
        )
        return str(wire["executionId"])

    async def status(self, execution_id: str) -> str:
        return str((await self.client.get(_uuid(execution_id)))["status"])

    async def work(self) -> int:
        claimed = await self.worker.run_once()
        await self.worker.drain()
        return claimed


def _uuid(text: str) -> Any:
    import uuid

    return uuid.UUID(text)


@pytest.fixture
async def rig(store: Store) -> Rig:
    await register(store, "add", "add")
    await register(
        store, "flaky", "fails", inputs={"depth": {"type": "integer", "default": 0}}, outputs={}
    )
    return Rig(store)


async def test_scheduler_promotes_exactly_when_due(rig: Rig) -> None:
    eid = await rig.submit("add", delay=10)
    assert await rig.status(eid) == "SCHEDULED"
    rig.clock.advance(9.999)
    assert await rig.scheduler.run_once() == 0
    assert await rig.scheduler.sleep_seconds() == pytest.approx(0.001, abs=1e-6)
    rig.clock.advance(0.001)
    assert await rig.scheduler.run_once() == 1
    assert await rig.status(eid) == "READY"


async def test_scheduler_sleeps_at_most_max_sleep_when_nothing_is_near(rig: Rig) -> None:
    await rig.submit("add", delay=3600)
    assert await rig.scheduler.sleep_seconds() == rig.scheduler.max_sleep


async def test_scheduler_promotes_in_bounded_batches(rig: Rig) -> None:
    for _ in range(7):
        await rig.submit("add", delay=5)
    rig.clock.advance(5)
    rig.scheduler.batch = 3
    assert await rig.scheduler.run_once() == 7


async def test_worker_runs_a_due_execution_to_success(rig: Rig) -> None:
    eid = await rig.submit("add", a=20, b=22)
    assert await rig.work() == 1
    got = await rig.client.get(_uuid(eid))
    assert got["status"] == "SUCCEEDED"
    assert got["output"] == {"sum": 42}
    [attempt] = await rig.client.attempts(_uuid(eid))
    assert attempt["status"] == "SUCCEEDED" and attempt["workerId"] == "w1"


async def test_retry_waits_the_exact_backoff_then_dead_letters(rig: Rig) -> None:
    eid = await rig.submit("flaky")
    await rig.work()
    got = await rig.client.get(_uuid(eid))
    assert got["status"] == "RETRY_WAIT"
    assert got["error"]["kind"] == "error" and got["error"]["attempt"] == 1
    # baseDelay 2 s, first retry: cap 2 s, and the random source draws the top.
    assert got["nextAttemptAt"] == "2026-03-01T12:00:02Z"
    rig.clock.advance(1.999)
    assert await rig.scheduler.run_once() == 0
    rig.clock.advance(0.001)
    assert await rig.scheduler.run_once() == 1
    await rig.work()
    got = await rig.client.get(_uuid(eid))
    assert got["nextAttemptAt"] == "2026-03-01T12:00:06Z"  # second retry: cap 4 s
    rig.clock.advance(4)
    await rig.scheduler.run_once()
    await rig.work()
    got = await rig.client.get(_uuid(eid))
    assert got["status"] == "FAILED"
    attempts = await rig.client.attempts(_uuid(eid))
    assert [a["status"] for a in attempts] == ["FAILED"] * 3
    replayed = await rig.client.replay(_uuid(eid))
    assert replayed["status"] == "READY" and replayed["maxAttempts"] == 6


async def test_a_stale_worker_cannot_commit(rig: Rig) -> None:
    eid = await rig.submit("add")
    [claimed] = await rig.store.execution_claim_ready(
        "zombie", 1, timedelta(seconds=30), rig.clock.now()
    )
    rig.clock.advance(31)
    assert await rig.reaper.run_once() == 1
    got = await rig.client.get(_uuid(eid))
    assert got["status"] == "RETRY_WAIT"
    assert got["error"]["kind"] == "lost"
    rig.clock.advance(2)
    await rig.scheduler.run_once()
    assert await rig.work() == 1
    assert await rig.status(eid) == "SUCCEEDED"
    # The zombie wakes up and reports with its old token: nothing changes.
    assert claimed.fencing_token is not None
    assert not await rig.store.execution_heartbeat(
        claimed.execution_id, claimed.fencing_token, timedelta(seconds=30), rig.clock.now()
    )
    attempts = await rig.client.attempts(_uuid(eid))
    assert [(a["workerId"], a["status"]) for a in attempts] == [
        ("zombie", "ABANDONED"),
        ("w1", "SUCCEEDED"),
    ]
    assert attempts[1]["fencingToken"] > attempts[0]["fencingToken"]


async def test_reaper_leaves_live_leases_alone(rig: Rig) -> None:
    await rig.submit("add")
    [claimed] = await rig.store.execution_claim_ready(
        "w9", 1, timedelta(seconds=30), rig.clock.now()
    )
    rig.clock.advance(20)
    assert claimed.fencing_token is not None
    assert await rig.store.execution_heartbeat(
        claimed.execution_id, claimed.fencing_token, timedelta(seconds=30), rig.clock.now()
    )
    rig.clock.advance(20)  # 40 s after the claim, 20 s after the heartbeat
    assert await rig.reaper.run_once() == 0


async def test_shutdown_releases_without_burning_an_attempt(rig: Rig) -> None:
    await register(rig.store, "sleepy", "async_sleeper", inputs={}, outputs={}, timeout=60)
    eid = await rig.submit("sleepy")
    assert await rig.worker.run_once() == 1
    assert await rig.worker.shutdown(grace=0.05) == 1
    got = await rig.client.get(_uuid(eid))
    assert got["status"] == "READY"
    assert got["attemptCount"] == 1 and got["maxAttempts"] == 3 + 1
    [attempt] = await rig.client.attempts(_uuid(eid))
    assert attempt["status"] == "ABANDONED"
    assert attempt["error"]["kind"] == "released"


async def test_a_timed_out_attempt_is_retried(rig: Rig) -> None:
    await register(rig.store, "hang", "async_sleeper", inputs={}, outputs={}, timeout=0.2)
    eid = await rig.submit("hang")
    await rig.work()
    got = await rig.client.get(_uuid(eid))
    assert got["status"] == "RETRY_WAIT"
    assert got["error"]["kind"] == "timeout"
    [attempt] = await rig.client.attempts(_uuid(eid))
    assert attempt["status"] == str(AttemptStatus.TIMED_OUT)


async def test_invalid_output_is_a_permanent_failure(rig: Rig) -> None:
    await register(rig.store, "wrong", "echo", inputs={"sum": "string"})
    eid = await rig.submit("wrong", sum="not a number")
    await rig.work()
    got = await rig.client.get(_uuid(eid))
    assert got["status"] == str(ExecutionStatus.FAILED)
    assert got["error"]["kind"] == "invalid_output"


async def test_a_worker_for_some_definitions_claims_only_those(rig: Rig) -> None:
    flaky = await rig.submit("flaky")
    add = await rig.submit("add")
    only_add = Worker(rig.store, rig.clock, worker_id="w2", definition_uris=["registry://jobs/add"])
    assert await only_add.run_once() == 1
    await only_add.drain()
    assert await rig.status(add) == "SUCCEEDED"
    assert await rig.status(flaky) == "READY"


async def test_a_large_output_is_kept_by_reference(rig: Rig) -> None:
    await register(rig.store, "big", "echo", inputs={"blob": "string"}, outputs={"blob": "string"})
    rig.worker.max_inline_output = 1000
    small = await rig.submit("big", blob="x" * 10)
    large = await rig.submit("big", blob="y" * 5000)
    await rig.work()
    got_small = await rig.client.get(_uuid(small))
    assert got_small["output"] == {"blob": "x" * 10}
    assert got_small["outputReference"] is None
    got_large = await rig.client.get(_uuid(large))
    assert got_large["status"] == "SUCCEEDED"
    assert got_large["output"] is None
    assert got_large["outputReference"] == f"tickwheel://executions/{large}/output"
    assert await rig.client.output(_uuid(large)) == {
        "output": {"blob": "y" * 5000},
        "outputReference": got_large["outputReference"],
    }
    assert (await rig.client.output(_uuid(small)))["output"] == {"blob": "x" * 10}


async def _lose_an_attempt(rig: Rig, eid: str) -> None:
    """A worker claims the execution and dies: its lease runs out and the reaper takes it."""
    [claimed] = await rig.store.execution_claim_ready(
        "doomed", 1, timedelta(seconds=30), rig.clock.now()
    )
    assert str(claimed.execution_id) == eid
    rig.clock.advance(31)
    assert await rig.reaper.run_once() == 1


async def test_an_attempt_lost_to_a_worker_death_does_not_spend_max_attempts(rig: Rig) -> None:
    await register(rig.store, "once", "add", retry={"maxAttempts": 1, "baseDelay": 2})
    eid = await rig.submit("once")
    await _lose_an_attempt(rig, eid)
    got = await rig.client.get(_uuid(eid))
    assert got["status"] == "RETRY_WAIT" and got["error"]["kind"] == "lost"
    assert got["error"]["lostAttempts"] == 1 and got["maxAttempts"] == 2  # given back
    rig.clock.advance(2)
    await rig.scheduler.run_once()
    assert await rig.work() == 1
    assert await rig.status(eid) == "SUCCEEDED"
    attempts = await rig.client.attempts(_uuid(eid))
    assert [(a["workerId"], a["status"]) for a in attempts] == [
        ("doomed", "ABANDONED"),
        ("w1", "SUCCEEDED"),
    ]


async def test_lost_attempts_have_a_cap_of_their_own(rig: Rig) -> None:
    retry = {"maxAttempts": 1, "maxLostAttempts": 3, "baseDelay": 2, "maxDelay": 2}
    await register(rig.store, "poison", "add", retry=retry)
    eid = await rig.submit("poison")
    for lost in (1, 2):
        await _lose_an_attempt(rig, eid)
        got = await rig.client.get(_uuid(eid))
        assert got["status"] == "RETRY_WAIT" and got["error"]["lostAttempts"] == lost
        rig.clock.advance(2)
        assert await rig.scheduler.run_once() == 1
    await _lose_an_attempt(rig, eid)
    got = await rig.client.get(_uuid(eid))
    assert got["status"] == "FAILED" and got["attemptCount"] == 3
    assert got["error"]["kind"] == "lost" and got["error"]["lostAttempts"] == 3
    assert "3 attempts were lost to worker deaths" in got["error"]["message"]
    assert "retry.maxLostAttempts (3)" in got["error"]["message"]
    # A replay gives a fresh budget of both kinds: the next loss is retried again.
    await rig.client.replay(_uuid(eid))
    await _lose_an_attempt(rig, eid)
    got = await rig.client.get(_uuid(eid))
    assert got["status"] == "RETRY_WAIT" and got["error"]["lostAttempts"] == 1
