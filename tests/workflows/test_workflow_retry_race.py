"""A retry racing a stalled advancer, on both backends, interleaved step by step (no sleeps).

An advancer (an orchestrator's, a sweep's, a request's) reads a run, then stalls; meanwhile the
run fails and a person retries it (``retry_count`` + 1, failed tasks back to PENDING). What the
stalled advancer then writes was decided for the old attempt: every task-run write and the
run's finish are guarded on the ``retry_count`` it read, so it changes nothing, is logged, and
the retried run proceeds and succeeds."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.workflows import jobs
from tests.workflows.helpers import TENANT, WorkflowRig, chain
from tickwheel.client.client import AsyncClient
from tickwheel.client.models import ExecutionInfo
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.domain.workflows import Workflow
from tickwheel.engine.worker import Worker
from tickwheel.observability.metrics import process_metrics
from tickwheel.workflows.runs import WorkflowRuns

SUPERSEDED = "was retried meanwhile"


class Stall:
    """Holds a coroutine at one await until the test releases it: a process stalled there."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

    async def wait(self) -> None:
        self.reached.set()
        await self.release.wait()


def stall_after_reading_the_run(
    runs: WorkflowRuns, monkeypatch: pytest.MonkeyPatch, stall: Stall
) -> None:
    """``advance`` loads the workflow right after reading the run: it stalls there."""
    load = runs.workflow

    async def stalled(name: str, version: int | None) -> Workflow:
        await stall.wait()
        return await load(name, version)

    monkeypatch.setattr(runs, "workflow", stalled)


def statuses(run: dict[str, Any]) -> dict[str, str]:
    return {t["name"]: t["status"] for t in run["tasks"]}


def superseded_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if SUPERSEDED in r.getMessage()]


def stale_writes() -> float:
    return process_metrics().registry.get_sample_value("tickwheel_workflow_stale_writes_total") or 0


@pytest.fixture(autouse=True)
def refusals_are_counted(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Every refusal logged is counted in ``tickwheel_workflow_stale_writes`` too."""
    before = stale_writes()
    yield
    logged = [r for r in caplog.get_records("call") if SUPERSEDED in r.getMessage()]
    assert stale_writes() - before == len(logged)


async def chain_whose_first_task_failed(
    rig: WorkflowRig, caplog: pytest.LogCaptureFixture
) -> uuid.UUID:
    """A run of a -> b whose a failed: its execution ended, its outbox row not yet consumed."""
    caplog.set_level(logging.INFO, logger="tickwheel.workflows")
    await rig.apply(chain({"name": "a"}, {"name": "b", "dependsOn": ["a"]}))
    jobs.FAIL.add("a")
    run_id = await rig.start("chain")
    await rig.scheduler.run_once()
    assert await rig.worker.run_once() == 1
    await rig.worker.drain()
    return run_id


async def test_a_stalled_advancer_cannot_fail_a_retried_run_again(
    rig: WorkflowRig, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    run_id = await chain_whose_first_task_failed(rig, caplog)

    # An advancer (a sweep, a second orchestrator) reads the run, RUNNING at retry 0, and stalls.
    slow = WorkflowRuns(rig.workflows, rig.client, TENANT, rig.clock)
    slow_stall = Stall()
    stall_after_reading_the_run(slow, monkeypatch, slow_stall)
    slow_advance = asyncio.create_task(slow.advance(run_id))
    await slow_stall.reached.wait()

    # The orchestrator records a's failure: b skipped, the run FAILED.
    assert await rig.orchestrator.run_once() == 1
    failed = await rig.get(run_id)
    assert (failed["status"], statuses(failed)) == ("FAILED", {"a": "FAILED", "b": "SKIPPED"})
    first_a = failed["tasks"][0]["executionId"]

    # A person retries; the request has reset the tasks and is about to submit a again.
    jobs.FAIL.clear()
    request_stall = Stall()
    stall_after_reading_the_run(rig.runs, monkeypatch, request_stall)
    retry = asyncio.create_task(rig.runs.retry(run_id))
    await request_stall.reached.wait()
    reset = await rig.get(run_id)
    assert (reset["status"], reset["retryCount"]) == ("RUNNING", 1)
    assert statuses(reset) == {"a": "PENDING", "b": "PENDING"}

    # The stalled advancer wakes up: for retry 0, a is ready under its old key, whose execution
    # failed. Its writes are refused: the reset task is not tied to the old execution.
    slow_stall.release.set()
    await slow_advance
    after = await rig.get(run_id)
    assert (after["status"], after["retryCount"]) == ("RUNNING", 1)
    assert statuses(after) == {"a": "PENDING", "b": "PENDING"}
    assert [t["executionId"] for t in after["tasks"]] == [None, None]
    assert superseded_logs(caplog)

    # The request goes on: a runs again under its retry key, and the run succeeds.
    request_stall.release.set()
    retried = await retry
    assert (retried["status"], statuses(retried)) == ("RUNNING", {"a": "SUBMITTED", "b": "PENDING"})
    assert retried["tasks"][0]["executionId"] != first_a
    await rig.settle()
    done = await rig.get(run_id)
    assert (done["status"], statuses(done)) == ("SUCCEEDED", {"a": "SUCCEEDED", "b": "SUCCEEDED"})
    # No execution was made for the stale attempt: a twice (its old key and retry 1), b once.
    assert sorted(await rig.executions()) == sorted(f"wf:{run_id}:{k}" for k in ("a", "a:1", "b:1"))


async def test_an_execution_a_stalled_advancer_submits_under_an_old_key_is_taken_back(
    rig: WorkflowRig, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Stalled long enough, an advancer of the old attempt finds a downstream task ready and
    submits it under the old attempt's key, which makes a new execution: nothing holds it, so
    it is cancelled before any worker runs it twice."""
    run_id = await chain_whose_first_task_failed(rig, caplog)

    slow = WorkflowRuns(rig.workflows, rig.client, TENANT, rig.clock)
    stall = Stall()
    stall_after_reading_the_run(slow, monkeypatch, stall)
    slow_advance = asyncio.create_task(slow.advance(run_id))
    await stall.reached.wait()  # read at retry 0, RUNNING

    assert await rig.orchestrator.run_once() == 1  # the run FAILED
    jobs.FAIL.clear()
    await rig.runs.retry(run_id)
    await rig.scheduler.run_once()
    assert await rig.worker.run_once() == 1
    await rig.worker.drain()  # a:1 succeeded
    # An orchestrator records it and is about to submit b: b is ready at retry 1.
    [event] = await rig.workflows.workflow_event_claim(
        "o2", 10, rig.orchestrator.lease, rig.clock.now()
    )
    await rig.runs.finished(run_id, event.execution_id, advance=False)
    assert await rig.workflows.workflow_event_delete("o2", [event.event_id]) == 1
    assert statuses(await rig.get(run_id)) == {"a": "SUCCEEDED", "b": "PENDING"}

    stall.release.set()
    await slow_advance
    assert superseded_logs(caplog)
    executions = await rig.executions()
    assert executions[f"wf:{run_id}:b"].status == "CANCELLED"  # made, then taken back
    after = await rig.get(run_id)
    assert (after["status"], statuses(after)) == ("RUNNING", {"a": "SUCCEEDED", "b": "PENDING"})

    await rig.runs.advance(run_id)  # the orchestrator goes on
    await rig.settle()
    done = await rig.get(run_id)
    assert (done["status"], statuses(done)) == ("SUCCEEDED", {"a": "SUCCEEDED", "b": "SUCCEEDED"})
    assert done["tasks"][1]["executionId"] == str(
        (await rig.executions())[f"wf:{run_id}:b:1"].execution_id
    )
    assert sorted(await rig.executions()) == sorted(
        f"wf:{run_id}:{k}" for k in ("a", "a:1", "b", "b:1")
    )


async def test_an_outcome_read_before_a_retry_is_recorded_for_the_retried_run(
    rig: WorkflowRig, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A task still running when its run was cancelled stays SUBMITTED through a retry: its
    outcome, read by an orchestrator that then stalls across the retry, still counts."""
    caplog.set_level(logging.INFO, logger="tickwheel.workflows")
    await rig.apply(chain({"name": "g", "definition": "registry://jobs/gate"}))
    jobs.GATE.append(asyncio.Event())
    run_id = await rig.start("chain")
    await rig.scheduler.run_once()
    gates = Worker(rig.store, rig.clock, worker_id="w2", definition_uris=["registry://jobs/gate"])
    assert await gates.run_once() == 1  # g is RUNNING until the gate opens
    cancelled = await rig.runs.cancel(run_id)
    assert (cancelled["status"], statuses(cancelled)) == ("CANCELLED", {"g": "SUBMITTED"})
    jobs.GATE[-1].set()
    await gates.drain()  # g succeeded; its outbox row waits

    # The orchestrator reads the run (retry 0) and g's execution, then stalls.
    stall = Stall()
    transport = InProcessTransport(rig.store, TENANT, rig.clock)
    client = AsyncClient(transport=transport, clock=rig.clock)
    read = client.get

    async def stalled_get(execution_id: uuid.UUID) -> ExecutionInfo:
        info = await read(execution_id)
        await stall.wait()
        return info

    monkeypatch.setattr(client, "get", stalled_get)
    orchestrator = rig.make_orchestrator("o2")
    monkeypatch.setattr(orchestrator, "client_for", lambda tenant: client)
    handling = asyncio.create_task(orchestrator.run_once())
    await stall.reached.wait()

    # Meanwhile the run is retried: g, still SUBMITTED, is kept, nothing is reset.
    retried = await rig.runs.retry(run_id)
    assert (retried["status"], retried["retryCount"]) == ("RUNNING", 1)
    assert statuses(retried) == {"g": "SUBMITTED"}

    # The orchestrator wakes up: its write for retry 0 is refused, and it records g's success
    # again for retry 1, so the run ends instead of waiting forever on a finished execution.
    stall.release.set()
    assert await handling == 1
    assert superseded_logs(caplog)
    done = await rig.get(run_id)
    assert (done["status"], statuses(done)) == ("SUCCEEDED", {"g": "SUCCEEDED"})
    assert done["tasks"][0]["output"] == {"done": "g"}
    assert sorted(await rig.executions()) == [f"wf:{run_id}:g"]
