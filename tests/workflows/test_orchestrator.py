"""Workflow runs end to end on a real store (SQLite and PostgreSQL): the orchestrator, the
scheduler and a worker driven by ``run_once`` on a fake clock."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.workflows import jobs
from tests.workflows.helpers import DIAMOND, WorkflowRig, chain
from tickwheel.domain.errors import Conflict, InvalidInput, NotFound


@pytest.fixture(autouse=True)
def no_failures() -> Iterator[None]:
    jobs.FAIL.clear()
    yield
    jobs.FAIL.clear()


def statuses(tasks: dict[str, dict[str, object]]) -> dict[str, object]:
    return {name: t["status"] for name, t in tasks.items()}


async def test_the_diamond_runs_with_outputs_flowing_into_inputs(rig: WorkflowRig) -> None:
    await rig.apply(DIAMOND)
    run_id = await rig.start("nightly-report", day="2026-03-01")
    # Only the root was submitted at start, under the run's key.
    tasks = await rig.tasks(run_id)
    assert statuses(tasks) == {
        "extract": "SUBMITTED",
        "clean": "PENDING",
        "stats": "PENDING",
        "publish": "PENDING",
    }
    await rig.settle()
    run = await rig.get(run_id)
    assert run["status"] == "SUCCEEDED"
    assert run["finishedAt"] is not None
    tasks = await rig.tasks(run_id)
    assert set(statuses(tasks).values()) == {"SUCCEEDED"}
    assert tasks["publish"]["output"] == {"published": "s3://clean/3+s3://stats/2026-03-01-a"}
    executions = await rig.executions()
    assert sorted(executions) == sorted(f"wf:{run_id}:{t}" for t in tasks)
    for name, task in tasks.items():
        assert str(executions[f"wf:{run_id}:{name}"].execution_id) == task["executionId"]
    assert executions[f"wf:{run_id}:clean"].inputs == {
        "rows": ["2026-03-01-a", "2026-03-01-b", "2026-03-01-c"]
    }


async def test_a_failed_task_skips_downstream_runs_cleanup_and_fails_the_run(
    rig: WorkflowRig,
) -> None:
    await rig.apply(
        chain(
            {"name": "a"},
            {"name": "b", "dependsOn": ["a"]},
            {"name": "d", "dependsOn": ["b"]},
            {"name": "notify", "dependsOn": ["b"], "triggerRule": "one_failed"},
            {"name": "cleanup", "dependsOn": ["d"], "triggerRule": "all_done"},
        )
    )
    jobs.FAIL.add("b")
    run_id = await rig.start("chain")
    await rig.settle()
    tasks = await rig.tasks(run_id)
    assert statuses(tasks) == {
        "a": "SUCCEEDED",
        "b": "FAILED",
        "d": "SKIPPED",
        "notify": "SUCCEEDED",
        "cleanup": "SUCCEEDED",
    }
    assert "step b fails" in tasks["b"]["error"]["message"]
    assert tasks["d"]["executionId"] is None
    assert (await rig.get(run_id))["status"] == "FAILED"


async def test_one_failed_is_skipped_when_nothing_fails(rig: WorkflowRig) -> None:
    await rig.apply(
        chain({"name": "a"}, {"name": "notify", "dependsOn": ["a"], "triggerRule": "one_failed"})
    )
    run_id = await rig.start("chain")
    await rig.settle()
    assert statuses(await rig.tasks(run_id)) == {"a": "SUCCEEDED", "notify": "SKIPPED"}
    assert (await rig.get(run_id))["status"] == "SUCCEEDED"


async def test_cancel_cancels_tasks_not_started_and_ends_the_run(rig: WorkflowRig) -> None:
    await rig.apply(chain({"name": "a"}, {"name": "b", "dependsOn": ["a"]}))
    run_id = await rig.start("chain")
    run = await rig.runs.cancel(run_id)
    assert run["status"] == "CANCELLED"
    assert statuses(await rig.tasks(run_id)) == {"a": "CANCELLED", "b": "CANCELLED"}
    execution = (await rig.executions())[f"wf:{run_id}:a"]
    assert execution.status == "CANCELLED"
    await rig.settle()  # the cancelled execution's outbox row changes nothing
    assert (await rig.get(run_id))["status"] == "CANCELLED"
    assert len(await rig.executions()) == 1
    with pytest.raises(Conflict):
        await rig.runs.cancel(run_id)


async def test_retry_keeps_succeeded_tasks_and_reruns_failed_and_skipped(
    rig: WorkflowRig,
) -> None:
    await rig.apply(
        chain({"name": "a"}, {"name": "b", "dependsOn": ["a"]}, {"name": "c", "dependsOn": ["b"]})
    )
    jobs.FAIL.add("b")
    run_id = await rig.start("chain")
    await rig.settle()
    first = await rig.tasks(run_id)
    assert statuses(first) == {"a": "SUCCEEDED", "b": "FAILED", "c": "SKIPPED"}
    jobs.FAIL.clear()
    run = await rig.runs.retry(run_id)
    assert run["status"] == "RUNNING"
    assert run["retryCount"] == 1
    await rig.settle()
    assert (await rig.get(run_id))["status"] == "SUCCEEDED"
    second = await rig.tasks(run_id)
    assert set(statuses(second).values()) == {"SUCCEEDED"}
    assert second["a"]["executionId"] == first["a"]["executionId"]  # kept, not rerun
    assert second["b"]["executionId"] != first["b"]["executionId"]
    keys = sorted(await rig.executions())
    assert keys == sorted(f"wf:{run_id}:{k}" for k in ("a", "b", "b:1", "c:1"))
    with pytest.raises(Conflict):  # a succeeded run is not retried
        await rig.runs.retry(run_id)


async def test_starting_a_run_is_idempotent_by_key(rig: WorkflowRig) -> None:
    await rig.apply(DIAMOND)
    first, created = await rig.runs.start("nightly-report", None, {"day": "2026-03-01"}, "k1")
    assert created
    again, created = await rig.runs.start("nightly-report", None, {"day": "2026-03-01"}, "k1")
    assert not created
    assert again["workflowRunId"] == first["workflowRunId"]
    with pytest.raises(Conflict):
        await rig.runs.start("nightly-report", None, {"day": "2026-03-02"}, "k1")
    other, created = await rig.runs.start("nightly-report", 1, {"day": "2026-03-01"}, "k2")
    assert created and other["workflowRunId"] != first["workflowRunId"]
    assert len(await rig.executions()) == 2  # one root execution per run


async def test_bad_run_requests_change_nothing(rig: WorkflowRig) -> None:
    await rig.apply(DIAMOND)
    with pytest.raises(InvalidInput) as bad:
        await rig.runs.start("nightly-report", None, {"day": "yesterday"})
    assert [e.path for e in bad.value.errors] == ["inputs.day"]
    with pytest.raises(NotFound):
        await rig.runs.start("nightly-report", 7, {"day": "2026-03-01"})
    with pytest.raises(NotFound):
        await rig.runs.get(uuid.uuid4())
    assert await rig.executions() == {}


async def test_advancing_again_or_redelivering_events_creates_nothing_new(
    rig: WorkflowRig,
) -> None:
    await rig.apply(DIAMOND)
    run_id = await rig.start("nightly-report", day="2026-03-01")
    await rig.runs.advance(run_id)  # as if a crashed orchestrator had already done it
    await rig.scheduler.run_once()
    await rig.worker.run_once()
    await rig.worker.drain()
    # A second orchestrator claims the outbox row and dies without handling it.
    crashed = rig.make_orchestrator("o2")
    claimed = await crashed.workflows.workflow_event_claim("o2", 10, crashed.lease, rig.clock.now())
    assert len(claimed) == 1
    assert await rig.orchestrator.run_once() == 0  # still leased to o2
    rig.clock.advance(31)  # the lease ends; o1 takes the row over
    await rig.settle()
    assert (await rig.get(run_id))["status"] == "SUCCEEDED"
    await rig.runs.advance(run_id)
    assert len(await rig.executions()) == 4
