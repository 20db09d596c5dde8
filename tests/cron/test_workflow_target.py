"""Cron jobs that target a workflow, end to end on a real store (SQLite and PostgreSQL) with a
fake clock: each occurrence starts exactly one workflow run, linked from the job's history, and
the overlap policy looks at whether the previous run is still RUNNING."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.cron.helpers import TENANT, CronRig
from tests.cron.test_service import Crashing, minutes
from tests.factories import T0
from tickwheel.domain.errors import InvalidInput
from tickwheel.store.protocol import Store
from tickwheel.workflows.orchestrator import Orchestrator

MINUTE = 60.0


@pytest.fixture
async def rig(store: Store) -> CronRig:
    rig = CronRig(store, T0)
    await rig.register_workflow()
    return rig


async def create(rig: CronRig, **doc: Any) -> dict[str, Any]:
    body = {
        "name": "wf-nightly",
        "workflow": {"name": "greeting"},
        "inputs": {"who": "Ada"},
        "expression": "* * * * *",
        **doc,
    }
    wire, created = await rig.jobs.cron_create(body)
    assert created
    return wire


def run_key(job: dict[str, Any], occurrence: str) -> str:
    return f"cron-wf:{job['cronJobId']}:{occurrence}"


async def test_each_occurrence_starts_one_workflow_run_at_its_time(rig: CronRig) -> None:
    job = await create(rig)
    assert job["target"] == "workflow" and job["definitionUri"] is None
    assert job["workflow"] == {"name": "greeting", "version": None}
    assert job["workflowVersionPolicy"] == "latest" and job["definitionVersionPolicy"] is None
    # A workflow run starts when it is created: nothing is materialised a lead ahead.
    assert await rig.tick() == 0
    for _ in range(3):
        await rig.advance(MINUTE)
    runs = await rig.workflow_runs(job)
    assert sorted(runs) == minutes(1, 2, 3)
    for occurrence, run in runs.items():
        assert run["idempotencyKey"] == run_key(job, occurrence)
        assert run["workflow"] == "greeting" and run["version"] == 1
        assert run["inputs"] == {"who": "Ada"} and run["status"] == "RUNNING"
        [task] = run["tasks"]
        assert task["status"] == "SUBMITTED"
    # Each run's task is one execution with the workflow's key, and nothing else was submitted.
    executions = await rig.executions()
    assert sorted(executions) == sorted(f"wf:{run['workflowRunId']}:hello" for run in runs.values())
    history = await rig.history(job["cronJobId"])
    assert [r["outcome"] for r in history] == ["SUBMITTED"] * 3
    assert all(r["executionId"] is None for r in history)
    assert all(r["workflowRunStatus"] == "RUNNING" for r in history)
    got = await rig.jobs.cron_get(job["cronJobId"])
    assert got["lastOccurrence"] == "2026-03-01T12:03:00Z"
    assert got["lastWorkflowRunId"] == runs["2026-03-01T12:03:00Z"]["workflowRunId"]
    assert got["lastExecutionId"] is None


async def test_a_crash_between_start_and_advance_starts_nothing_twice(rig: CronRig) -> None:
    job = await create(rig)
    rig.clock.advance(MINUTE)
    doomed = rig.make_service("doomed", Crashing(rig.cron))  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        await doomed.run_once()
    started = await rig.workflows.workflow_run_get_by_key(
        TENANT, run_key(job, "2026-03-01T12:01:00Z")
    )
    assert started is not None
    assert await rig.history(job["name"]) == []
    assert await rig.tick() == 0  # the dead instance's claim holds until its lease runs out
    rig.clock.advance(31)
    await rig.tick()
    await rig.tick()  # and a materialiser run again finds nothing new to do
    [row] = await rig.history(job["name"])
    assert row["workflowRunId"] == str(started.workflow_run_id)
    assert list(await rig.workflow_runs(job)) == minutes(1)
    assert len(await rig.executions()) == 1  # the run's one task, submitted once


async def test_overlap_forbid_skips_while_the_previous_run_is_running(rig: CronRig) -> None:
    job = await create(rig, overlapPolicy="forbid")
    await rig.advance(MINUTE)
    [first] = (await rig.workflow_runs(job)).values()
    await rig.advance(MINUTE)  # 12:02: the 12:01 run is still RUNNING
    history = {r["occurrence"]: r for r in await rig.history(job["name"])}
    skipped = history["2026-03-01T12:02:00Z"]
    assert skipped["outcome"] == "SKIPPED_OVERLAP" and skipped["workflowRunId"] is None
    assert f"workflow run {first['workflowRunId']}" in skipped["reason"]
    assert "still RUNNING" in skipped["reason"] and "overlapPolicy forbid" in skipped["reason"]
    # The run's task succeeds; the orchestrator ends the run SUCCEEDED.
    await rig.finish(uuid.UUID(first["tasks"][0]["executionId"]))
    orchestrator = Orchestrator(rig.workflows, rig.store, lambda _: rig.client, clock=rig.clock)
    while await orchestrator.run_once():
        pass
    assert (await rig.client.workflows.get_run(first["workflowRunId"])).status == "SUCCEEDED"
    await rig.advance(MINUTE)  # 12:03 runs again
    assert await rig.outcomes(job["name"]) == [
        ("2026-03-01T12:01:00Z", "SUBMITTED"),
        ("2026-03-01T12:02:00Z", "SKIPPED_OVERLAP"),
        ("2026-03-01T12:03:00Z", "SUBMITTED"),
    ]
    assert sorted(await rig.workflow_runs(job)) == minutes(1, 3)


async def test_overlap_replace_cancels_the_running_run(rig: CronRig) -> None:
    job = await create(rig, overlapPolicy="replace")
    await rig.advance(MINUTE)
    [first] = (await rig.workflow_runs(job)).values()
    await rig.advance(MINUTE)
    assert (await rig.client.workflows.get_run(first["workflowRunId"])).status == "CANCELLED"
    rows = await rig.history(job["name"])
    replaced = [r for r in rows if r["outcome"] == "REPLACED"]
    assert [(r["occurrence"], r["workflowRunId"]) for r in replaced] == [
        ("2026-03-01T12:01:00Z", first["workflowRunId"])
    ]
    assert "overlapPolicy replace" in replaced[0]["reason"]
    second = [r for r in rows if r["outcome"] == "SUBMITTED" and r["occurrence"].endswith("02:00Z")]
    assert "replaced the previous run (workflow run" in second[0]["reason"]
    # The cancelled run's task never started: its execution was cancelled with it.
    execution = await rig.client.get(first["tasks"][0]["executionId"])
    assert str(execution.status) == "CANCELLED"


async def test_a_missed_occurrence_runs_once_after_an_outage(rig: CronRig) -> None:
    job = await create(rig)  # misfirePolicy run_once
    rig.clock.advance(10 * MINUTE)
    await rig.tick()
    outcomes = dict(await rig.outcomes(job["name"]))
    assert outcomes["2026-03-01T12:01:00Z"] == "COALESCED"
    started = sorted(await rig.workflow_runs(job))
    assert started == minutes(8, 9, 10)  # the latest missed one, then the ones in the grace


async def test_a_run_the_workflow_refuses_is_recorded_failed_and_the_job_moves_on(
    rig: CronRig,
) -> None:
    job = await create(rig)
    # Version 2 of the workflow wants another input: "latest" no longer accepts the job's.
    await rig.client.workflows.apply(
        "name: greeting\nversion: 2\ninputs: {person: {type: string, required: true}}\n"
        "tasks:\n  - {name: hello, definition: registry://jobs/greet,"
        ' inputs: {name: "${{ inputs.person }}"}}\n',
        "yaml",
    )
    await rig.advance(MINUTE)
    [row] = await rig.history(job["name"])
    assert row["outcome"] == "FAILED" and "the API refused it" in row["reason"]
    assert "inputs.person" in row["reason"]
    got = await rig.jobs.cron_get(job["name"])
    assert got["nextRunAt"] == "2026-03-01T12:02:00Z"


async def test_switching_a_job_from_a_definition_to_a_workflow(rig: CronRig) -> None:
    job = await rig.create(expression="* * * * *", overlapPolicy="forbid")
    await rig.advance(MINUTE)
    [execution] = (await rig.executions()).values()
    changed = await rig.jobs.cron_update(
        job["name"], {"workflow": {"name": "greeting", "version": 1}, "inputs": {"who": "Bo"}}
    )
    assert changed["target"] == "workflow" and changed["definitionUri"] is None
    assert changed["workflowVersionPolicy"] == "pinned"
    # The previous occurrence became an execution that has not finished: still an overlap.
    await rig.advance(MINUTE)
    skipped = (await rig.history(job["name"]))[-1]
    assert skipped["outcome"] == "SKIPPED_OVERLAP"
    assert f"execution {execution.execution_id}" in skipped["reason"]
    await rig.finish(execution.execution_id)
    await rig.advance(MINUTE)
    assert sorted(await rig.workflow_runs(job)) == minutes(3)


@pytest.mark.parametrize(
    ("doc", "path", "words"),
    [
        ({"definitionUri": "greet"}, "workflow", "not both"),
        ({"workflow": None}, "definitionUri", "give either definitionUri"),
        ({"workflow": {"name": "nope"}}, "workflow.name", "no workflow is registered"),
        ({"workflow": {"name": "greeting", "version": 7}}, "workflow.version", "version 7"),
        ({"inputs": {"who": 5}}, "inputs.who", "workflow greeting version 1"),
        ({"inputs": {}}, "inputs.who", "workflow greeting version 1"),
        ({"jitter": 5}, "jitter", "not available for a workflow target"),
        ({"definitionVersion": 1}, "definitionVersion", "applies to a definition target"),
    ],
)
async def test_an_invalid_workflow_target_is_refused_and_stores_nothing(
    rig: CronRig, doc: dict[str, Any], path: str, words: str
) -> None:
    body = {
        "name": "bad",
        "workflow": {"name": "greeting"},
        "inputs": {"who": "Ada"},
        "expression": "@daily",
        **doc,
    }
    with pytest.raises(InvalidInput) as refused:
        await rig.jobs.cron_create(body)
    assert path in [e.path for e in refused.value.errors]
    assert words in str(refused.value)
    assert await rig.cron.cron_job_get_by_name(TENANT, "bad") is None
