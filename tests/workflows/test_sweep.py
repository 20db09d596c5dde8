"""The orchestrator's sweep for stalled runs, on both backends with a fake clock: a crash between
a run's insert and the submission of its roots (or between recording a task's outcome and
submitting what became ready) leaves a RUNNING run that no outbox row will advance; the sweep
finds it after the grace period and submits each ready task exactly once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tests.workflows import jobs
from tests.workflows.helpers import DIAMOND, TENANT, WorkflowRig, chain
from tickwheel.domain.workflow_runs import TaskRunStatus
from tickwheel.workflows.runs import WorkflowRuns

GRACE = timedelta(seconds=30)
ROOTS = chain({"name": "r1"}, {"name": "r2"}, {"name": "join", "dependsOn": ["r1", "r2"]})


@pytest.fixture(autouse=True)
def no_failures() -> Iterator[None]:
    jobs.FAIL.clear()
    yield
    jobs.FAIL.clear()


class Crash(Exception):
    """The process died here."""


async def crashed_start(
    rig: WorkflowRig, monkeypatch: pytest.MonkeyPatch, name: str, **inputs: Any
) -> uuid.UUID:
    """Starts a run whose request dies after the run's insert, before any submission."""

    async def crash(self: WorkflowRuns, workflow_run_id: uuid.UUID) -> None:
        raise Crash

    key = uuid.uuid4().hex
    with monkeypatch.context() as patch:
        patch.setattr(WorkflowRuns, "advance", crash)
        with pytest.raises(Crash):
            await rig.runs.start(name, None, inputs, key)
    run = await rig.workflows.workflow_run_get_by_key(TENANT, key)
    assert run is not None
    return run.workflow_run_id


def keys(executions: dict[str, Any]) -> list[str]:
    return sorted(executions)


async def test_roots_lost_in_a_crash_are_submitted_once_by_the_sweep(
    rig: WorkflowRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    await rig.apply(ROOTS)
    run_id = await crashed_start(rig, monkeypatch, "chain")
    tasks = await rig.tasks(run_id)
    assert [tasks[t]["status"] for t in ("r1", "r2", "join")] == ["PENDING"] * 3
    assert await rig.executions() == {}

    # Within the grace period the run may still be in its starting request: left alone.
    rig.clock.advance(GRACE.total_seconds() - 1)
    assert await rig.orchestrator.sweep() == 0
    assert await rig.executions() == {}

    rig.clock.advance(2)
    assert await rig.orchestrator.sweep() == 1
    assert rig.metrics.value("tickwheel_workflow_runs_swept_total") == 1
    tasks = await rig.tasks(run_id)
    assert [tasks[t]["status"] for t in ("r1", "r2", "join")] == [
        "SUBMITTED",
        "SUBMITTED",
        "PENDING",
    ]
    executions = await rig.executions()
    assert keys(executions) == [f"wf:{run_id}:r1", f"wf:{run_id}:r2"]
    assert str(executions[f"wf:{run_id}:r1"].execution_id) == tasks["r1"]["executionId"]

    # Nothing is stalled any more: the roots are in flight, the join waits on them.
    rig.clock.advance(3600)
    assert await rig.orchestrator.sweep() == 0
    await rig.settle()
    assert (await rig.get(run_id))["status"] == "SUCCEEDED"
    assert keys(await rig.executions()) == sorted(f"wf:{run_id}:{t}" for t in ("r1", "r2", "join"))
    assert await rig.orchestrator.sweep() == 0
    # One outbox row per finished execution, each consumed once.
    assert rig.metrics.value("tickwheel_workflow_events_total") == 3
    assert rig.metrics.value("tickwheel_workflow_runs_swept_total") == 1


async def test_orchestrators_sweeping_at_once_submit_each_root_once(
    rig: WorkflowRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    await rig.apply(ROOTS)
    runs = [await crashed_start(rig, monkeypatch, "chain") for _ in range(3)]
    rig.clock.advance(GRACE.total_seconds() + 1)
    sweepers = [rig.make_orchestrator(f"o{i}") for i in range(3)]
    advanced = await asyncio.gather(*(o.sweep() for o in sweepers))
    assert sum(advanced) >= 3  # each run at least once, maybe by several
    executions = await rig.executions()
    assert keys(executions) == sorted(f"wf:{r}:{t}" for r in runs for t in ("r1", "r2"))
    for run_id in runs:
        tasks = await rig.tasks(run_id)
        for root in ("r1", "r2"):
            assert tasks[root]["status"] == "SUBMITTED"
            assert tasks[root]["executionId"] == str(executions[f"wf:{run_id}:{root}"].execution_id)
    await rig.settle()
    for run_id in runs:
        assert (await rig.get(run_id))["status"] == "SUCCEEDED"
    assert len(await rig.executions()) == 3 * 3


async def test_a_ready_task_whose_submission_was_lost_is_submitted(rig: WorkflowRig) -> None:
    await rig.apply(DIAMOND)
    run_id = await rig.start("nightly-report", day="2026-03-01")
    await rig.scheduler.run_once()
    await rig.worker.run_once()
    await rig.worker.drain()
    # An orchestrator records extract's outcome, then dies before submitting clean and stats;
    # its outbox row is gone (as if consumed by a bug, or by an older version): nothing else
    # will ever advance the run.
    [event] = await rig.workflows.workflow_event_claim("o2", 10, GRACE, rig.clock.now())
    await rig.runs.finished(run_id, event.execution_id, advance=False)
    assert await rig.workflows.workflow_event_delete("o2", [event.event_id]) == 1
    tasks = await rig.tasks(run_id)
    assert [t["status"] for t in tasks.values()] == ["SUCCEEDED", "PENDING", "PENDING", "PENDING"]
    assert await rig.orchestrator.run_once() == 0

    rig.clock.advance(GRACE.total_seconds() - 1)
    assert await rig.orchestrator.sweep() == 0
    rig.clock.advance(2)
    assert await rig.orchestrator.sweep() == 1
    tasks = await rig.tasks(run_id)
    assert [t["status"] for t in tasks.values()] == [
        "SUCCEEDED",
        "SUBMITTED",
        "SUBMITTED",
        "PENDING",
    ]
    await rig.settle()
    assert (await rig.get(run_id))["status"] == "SUCCEEDED"
    assert len(await rig.executions()) == 4


async def test_a_retry_that_crashed_before_submitting_is_swept(
    rig: WorkflowRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    await rig.apply(chain({"name": "a"}, {"name": "b", "dependsOn": ["a"]}))
    jobs.FAIL.add("b")
    run_id = await rig.start("chain")
    await rig.settle()
    assert (await rig.get(run_id))["status"] == "FAILED"
    jobs.FAIL.clear()

    async def crash(self: WorkflowRuns, workflow_run_id: uuid.UUID) -> None:
        raise Crash

    with monkeypatch.context() as patch:
        patch.setattr(WorkflowRuns, "advance", crash)
        with pytest.raises(Crash):
            await rig.runs.retry(run_id)
    assert (await rig.tasks(run_id))["b"]["status"] == "PENDING"
    rig.clock.advance(GRACE.total_seconds() + 1)
    assert await rig.orchestrator.sweep() == 1
    await rig.settle()
    assert (await rig.get(run_id))["status"] == "SUCCEEDED"
    assert keys(await rig.executions()) == sorted(f"wf:{run_id}:{k}" for k in ("a", "b", "b:1"))


async def test_a_run_whose_tasks_all_finished_but_never_ended_is_ended(
    rig: WorkflowRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    await rig.apply(chain({"name": "a"}, {"name": "b", "dependsOn": ["a"]}))
    run_id = await crashed_start(rig, monkeypatch, "chain")
    # The starting request failed a, skipped b, and died before ending the run.
    now = rig.clock.now()
    update = rig.workflows.workflow_task_run_update
    assert await update(
        run_id, "a", [TaskRunStatus.PENDING], TaskRunStatus.FAILED, now, retry_count=0
    )
    assert await update(
        run_id, "b", [TaskRunStatus.PENDING], TaskRunStatus.SKIPPED, now, retry_count=0
    )
    rig.clock.advance(GRACE.total_seconds() + 1)
    assert await rig.orchestrator.sweep() == 1
    run = await rig.get(run_id)
    assert run["status"] == "FAILED" and run["finishedAt"] is not None
    assert await rig.executions() == {}


async def test_runs_in_progress_are_never_stalled(rig: WorkflowRig) -> None:
    await rig.apply(DIAMOND)
    run_id = await rig.start("nightly-report", day="2026-03-01")
    # The root is submitted and not yet run: however long it takes, the run waits on it.
    rig.clock.advance(24 * 3600)
    stalled = await rig.workflows.workflow_run_list_stalled(GRACE, 10, None, rig.clock.now())
    assert stalled == []
    await rig.scheduler.run_once()
    await rig.worker.run_once()
    await rig.worker.drain()
    # extract finished; its outbox row is waiting. Until recorded, clean and stats are not ready.
    assert await rig.workflows.workflow_run_list_stalled(GRACE, 10, None, rig.clock.now()) == []
    await rig.settle()
    assert (await rig.get(run_id))["status"] == "SUCCEEDED"
    rig.clock.advance(24 * 3600)
    assert await rig.workflows.workflow_run_list_stalled(GRACE, 10, None, rig.clock.now()) == []


async def test_the_sweep_pages_through_stalled_runs_in_bounded_batches(
    rig: WorkflowRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    await rig.apply(chain({"name": "only"}))
    runs = sorted([await crashed_start(rig, monkeypatch, "chain") for _ in range(5)])
    rig.clock.advance(GRACE.total_seconds() + 1)
    now = rig.clock.now()
    list_stalled = rig.workflows.workflow_run_list_stalled
    assert await list_stalled(GRACE, 2, None, now) == runs[:2]
    assert await list_stalled(GRACE, 2, runs[1], now) == runs[2:4]
    assert await list_stalled(GRACE, 2, runs[3], now) == runs[4:]
    sweeper = rig.make_orchestrator("pager")
    sweeper.batch = 2
    assert await sweeper.sweep() == 5
    assert keys(await rig.executions()) == sorted(f"wf:{r}:only" for r in runs)
    assert await list_stalled(GRACE, 2, None, now) == []


async def test_the_orchestrator_sweeps_when_it_starts(
    rig: WorkflowRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    await rig.apply(ROOTS)
    run_id = await crashed_start(rig, monkeypatch, "chain")
    rig.clock.advance(GRACE.total_seconds() + 1)
    orchestrator = rig.make_orchestrator("starting")
    orchestrator.poll = 0.05
    loop = asyncio.create_task(orchestrator.run())
    try:
        async with asyncio.timeout(10):
            while len(await rig.executions()) < 2:  # noqa: ASYNC110 - polls the store
                await asyncio.sleep(0.02)
    finally:
        orchestrator.stop()
        await asyncio.wait_for(loop, 5)
    assert keys(await rig.executions()) == [f"wf:{run_id}:r1", f"wf:{run_id}:r2"]
    assert rig.metrics.value("tickwheel_workflow_runs_swept_total") == 1
