"""The workflow rules as services, on both backends: registering a workflow is created / same /
conflict like a Job Definition, a bad one changes nothing; starting a run is created, the same
key and inputs again same (the original run), the same key with other inputs a conflict, and
inputs that do not fit the workflow start nothing."""

from __future__ import annotations

import pytest

from tests.workflows.helpers import DIAMOND, TENANT, WorkflowRig
from tickwheel.app.outcomes import Outcome
from tickwheel.app.workflow_runs import WorkflowRunService
from tickwheel.app.workflows import WorkflowDefinitionService
from tickwheel.domain.errors import Conflict, InvalidInput
from tickwheel.domain.workflow_runs import RunStatus, TaskRunStatus
from tickwheel.store.protocol import Store

DAY = {"day": "2026-03-01"}


@pytest.fixture
async def rig(store: Store) -> WorkflowRig:
    rig = WorkflowRig(store)
    await rig.register_jobs()
    return rig


def services(rig: WorkflowRig) -> tuple[WorkflowDefinitionService, WorkflowRunService]:
    """The app's services, with the in-process SDK of the tenant as the runs' task executions."""
    return (
        WorkflowDefinitionService(rig.workflows, rig.store, TENANT, rig.clock),
        WorkflowRunService(rig.workflows, rig.client, TENANT, rig.clock),
    )


async def test_registering_is_created_then_same_then_a_conflict(rig: WorkflowRig) -> None:
    definitions, _ = services(rig)
    first = await definitions.apply_file(DIAMOND, "yaml")
    assert first.outcome is Outcome.CREATED and first.value.owner == TENANT
    again = await definitions.apply_file(DIAMOND, "yaml")
    assert again.outcome is Outcome.SAME and again.value.content_hash == first.value.content_hash
    with pytest.raises(Conflict):
        await definitions.apply_file(
            DIAMOND.replace("[clean, stats]", "[clean, stats, extract]"), "yaml"
        )
    with pytest.raises(InvalidInput):  # a task depending on one that does not exist
        await definitions.apply_file(DIAMOND.replace("[clean, stats]", "[clean, nope]"), "yaml")
    # a task on a Job Definition nobody registered:
    with pytest.raises(InvalidInput):
        await definitions.apply_file(
            DIAMOND.replace("version: 1", "version: 2").replace("jobs/stats", "jobs/nope"), "yaml"
        )
    assert [(s.name, s.version) for s in await definitions.latest()] == [("nightly-report", 1)]


async def test_starting_a_run_is_created_then_same_then_a_conflict(rig: WorkflowRig) -> None:
    definitions, runs = services(rig)
    await definitions.apply_file(DIAMOND, "yaml")

    started = await runs.start_run("nightly-report", None, DAY, "nightly:1")
    assert started.outcome is Outcome.CREATED
    state = started.value
    assert state.run.status is RunStatus.RUNNING and state.run.idempotency_key == "nightly:1"
    # The root was submitted by the start itself; the rest wait for it.
    assert [(t.task_name, t.status) for t in state.tasks] == [
        ("extract", TaskRunStatus.SUBMITTED),
        ("clean", TaskRunStatus.PENDING),
        ("stats", TaskRunStatus.PENDING),
        ("publish", TaskRunStatus.PENDING),
    ]

    again = await runs.start_run("nightly-report", None, DAY, "nightly:1")
    assert again.outcome is Outcome.SAME
    assert again.value.run.workflow_run_id == state.run.workflow_run_id

    with pytest.raises(Conflict):
        await runs.start_run("nightly-report", None, {"day": "2026-03-02"}, "nightly:1")


async def test_inputs_that_do_not_fit_start_nothing(rig: WorkflowRig) -> None:
    definitions, runs = services(rig)
    await definitions.apply_file(DIAMOND, "yaml")
    with pytest.raises(InvalidInput):
        await runs.start_run("nightly-report", None, {"day": "not a date"}, "bad:1")
    assert await rig.workflows.workflow_run_get_by_key(TENANT, "bad:1") is None
    # The key was not taken: the corrected request starts the run under it.
    fixed = await runs.start_run("nightly-report", None, DAY, "bad:1")
    assert fixed.outcome is Outcome.CREATED


async def test_cancel_and_retry_return_the_run_state(rig: WorkflowRig) -> None:
    definitions, runs = services(rig)
    await definitions.apply_file(DIAMOND, "yaml")
    run_id = (await runs.start_run("nightly-report", None, DAY)).value.run.workflow_run_id
    with pytest.raises(Conflict, match="only FAILED or CANCELLED"):
        await runs.retry_run(run_id)

    cancelled = await runs.cancel_run(run_id)
    assert cancelled.run.status is RunStatus.CANCELLED
    assert {t.status for t in cancelled.tasks} == {TaskRunStatus.CANCELLED}
    with pytest.raises(Conflict, match="not RUNNING"):
        await runs.cancel_run(run_id)

    retried = await runs.retry_run(run_id)
    assert retried.run.status is RunStatus.RUNNING and retried.run.retry_count == 1
    assert retried.tasks[0].status is TaskRunStatus.SUBMITTED
