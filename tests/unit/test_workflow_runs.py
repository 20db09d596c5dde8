"""Readiness (domain/workflow_runs.py): named cases, then random DAGs driven to completion with
random outcomes, checking every decision against the trigger rules spelled out here."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.workflow_runs import (
    RETRYABLE_TASK,
    TASK_TERMINAL,
    RunStatus,
    TaskRunStatus,
    evaluate,
    run_status_of,
    task_status_of,
)
from tickwheel.domain.workflows import TriggerRule, Workflow, WorkflowTask

T = TaskRunStatus


def wf(*specs: tuple[str, tuple[str, ...], TriggerRule]) -> Workflow:
    tasks = tuple(
        WorkflowTask(name=n, definition="job", depends_on=deps, trigger_rule=rule)
        for n, deps, rule in specs
    )
    return Workflow(name="w", version=1, tasks=tasks)


OK = TriggerRule.ALL_SUCCESS
DONE = TriggerRule.ALL_DONE
FAILED = TriggerRule.ONE_FAILED
DIAMOND = wf(
    ("a", (), OK),
    ("b", ("a",), OK),
    ("c", ("a",), OK),
    ("d", ("b", "c"), OK),
    ("cleanup", ("d",), DONE),
    ("alert", ("b", "c"), FAILED),
)


def test_roots_are_submitted_first() -> None:
    e = evaluate(DIAMOND, {})
    assert e.submit == ("a",) and e.skip == () and e.run_status is RunStatus.RUNNING
    assert evaluate(DIAMOND, e.statuses).submit == ()  # idempotent


def test_success_path() -> None:
    e = evaluate(DIAMOND, {"a": T.SUCCEEDED})
    assert e.submit == ("b", "c")
    e = evaluate(DIAMOND, {"a": T.SUCCEEDED, "b": T.SUCCEEDED, "c": T.SUBMITTED})
    assert e.submit == ()
    e = evaluate(DIAMOND, {"a": T.SUCCEEDED, "b": T.SUCCEEDED, "c": T.SUCCEEDED})
    assert e.submit == ("d",) and e.skip == ("alert",)
    done = {"a": T.SUCCEEDED, "b": T.SUCCEEDED, "c": T.SUCCEEDED, "d": T.SUCCEEDED}
    e = evaluate(DIAMOND, done)
    assert e.submit == ("cleanup",)
    e = evaluate(DIAMOND, {**e.statuses, "cleanup": T.SUCCEEDED})
    assert e.run_status is RunStatus.SUCCEEDED


def test_failure_skips_downstream_runs_cleanup_and_alert_and_fails_the_run() -> None:
    e = evaluate(DIAMOND, {"a": T.SUCCEEDED, "b": T.FAILED, "c": T.SUCCEEDED})
    assert e.skip == ("d",)
    assert e.submit == ("cleanup", "alert")  # all_done after a skip; one_failed after b
    end = {**e.statuses, "cleanup": T.SUCCEEDED, "alert": T.SUCCEEDED}
    assert evaluate(DIAMOND, end).run_status is RunStatus.FAILED


def test_a_root_failure_skips_the_whole_chain_in_one_evaluation() -> None:
    e = evaluate(DIAMOND, {"a": T.FAILED})
    assert e.skip == ("b", "c", "d", "alert")  # alert: b and c were skipped, not failed
    assert e.submit == ("cleanup",)


def test_cancelled_tasks_end_the_run_cancelled() -> None:
    statuses = {n.name: T.CANCELLED for n in DIAMOND.tasks} | {"a": T.SUCCEEDED}
    assert evaluate(DIAMOND, statuses).run_status is RunStatus.CANCELLED
    e = evaluate(DIAMOND, {"a": T.CANCELLED})  # its execution was cancelled directly
    assert e.skip == ("b", "c", "d", "alert") and e.submit == ("cleanup",)


@pytest.mark.parametrize(
    ("execution", "task"),
    [
        (ExecutionStatus.SUCCEEDED, T.SUCCEEDED),
        (ExecutionStatus.FAILED, T.FAILED),
        (ExecutionStatus.CANCELLED, T.CANCELLED),
        (ExecutionStatus.RUNNING, T.SUBMITTED),
        (ExecutionStatus.RETRY_WAIT, T.SUBMITTED),
    ],
)
def test_task_status_of_execution(execution: ExecutionStatus, task: TaskRunStatus) -> None:
    assert task_status_of(execution) is task


def retry_plan(statuses: dict[str, TaskRunStatus]) -> tuple[str, ...]:
    """What a retry resets, as the stores select it inside the retry: by RETRYABLE_TASK."""
    return tuple(name for name, s in statuses.items() if s in RETRYABLE_TASK)


def test_retry_plan_keeps_succeeded_tasks() -> None:
    statuses = {"a": T.SUCCEEDED, "b": T.FAILED, "c": T.SKIPPED, "d": T.CANCELLED}
    assert retry_plan(statuses) == ("b", "c", "d")
    assert run_status_of([]) is RunStatus.SUCCEEDED


@st.composite
def dags(draw: st.DrawFn) -> Workflow:
    n = draw(st.integers(1, 12))
    specs = []
    for i in range(n):
        deps = draw(st.sets(st.integers(0, i - 1), max_size=3)) if i else set()
        rule = draw(st.sampled_from(list(TriggerRule)))
        specs.append((f"t{i}", tuple(f"t{d}" for d in sorted(deps)), rule))
    return wf(*specs)


@settings(max_examples=300, deadline=None)
@given(dags(), st.randoms(use_true_random=False))
def test_random_dags_run_to_completion_obeying_trigger_rules(
    workflow: Workflow, rnd: random.Random
) -> None:
    statuses: dict[str, TaskRunStatus] = {}
    for _ in range(4 * len(workflow.tasks) + 2):
        e = evaluate(workflow, statuses)
        before = {t.name: statuses.get(t.name, T.PENDING) for t in workflow.tasks}
        for name in e.submit + e.skip:
            task = workflow.task(name)
            upstream = [
                before[d] if d not in e.statuses else e.statuses[d] for d in task.depends_on
            ]
            assert before[name] is T.PENDING
            assert all(s in TASK_TERMINAL for s in upstream)  # never before upstream finished
            runs = name in e.submit
            if task.trigger_rule is TriggerRule.ALL_SUCCESS:
                assert runs == all(s is T.SUCCEEDED for s in upstream)
            elif task.trigger_rule is TriggerRule.ONE_FAILED:
                assert runs == (T.FAILED in upstream)
            else:
                assert runs
        # Nothing decidable is left undecided, and a second evaluation adds nothing.
        again = evaluate(workflow, e.statuses)
        assert again.submit == () and again.skip == ()
        statuses = dict(e.statuses)
        running = [n for n, s in statuses.items() if s is T.SUBMITTED]
        if not running:
            break
        finished = rnd.choice(running)
        statuses[finished] = rnd.choice([T.SUCCEEDED, T.FAILED])
    assert all(s in TASK_TERMINAL for s in statuses.values())
    assert len(statuses) == len(workflow.tasks)
    final = evaluate(workflow, statuses).run_status
    expected = RunStatus.FAILED if T.FAILED in statuses.values() else RunStatus.SUCCEEDED
    assert final is expected
    if final is RunStatus.SUCCEEDED:  # no failure: skips come only from one_failed tasks
        for task in workflow.tasks:
            skipped = statuses[task.name] is T.SKIPPED
            upstream_skipped = any(statuses[d] is T.SKIPPED for d in task.depends_on)
            if task.trigger_rule is TriggerRule.ONE_FAILED:
                assert skipped
            elif task.trigger_rule is TriggerRule.ALL_DONE:
                assert not skipped
            else:
                assert skipped == upstream_skipped


@settings(max_examples=200, deadline=None)
@given(dags(), st.randoms(use_true_random=False))
def test_retry_resets_only_unsuccessful_tasks_and_reaches_an_end(
    workflow: Workflow, rnd: random.Random
) -> None:
    statuses = {t.name: rnd.choice(sorted(TASK_TERMINAL)) for t in workflow.tasks}
    reset = retry_plan(statuses)
    after = {**statuses, **{n: T.PENDING for n in reset}}
    assert all(after[n] is T.SUCCEEDED for n in statuses if n not in reset)
    e = evaluate(workflow, after)
    if reset:
        assert e.run_status is RunStatus.RUNNING or not (set(e.submit) | set(e.skip)) < set(reset)
