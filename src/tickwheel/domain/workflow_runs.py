"""Workflow Run and Task Run states, and readiness: which tasks may run now.

Pure. The orchestrator reads a run's task statuses, calls ``evaluate`` and writes the result
with guarded updates; evaluating twice changes nothing the second time, so a crash between
evaluation and write is repaired by evaluating again.

Task Run:  PENDING -> SUBMITTED -> SUCCEEDED | FAILED      (the execution's outcome)
           PENDING -> SKIPPED      (its trigger rule can no longer be met)
           PENDING | SUBMITTED -> CANCELLED   (the run was cancelled)
Run:       RUNNING -> SUCCEEDED | FAILED | CANCELLED
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.workflows import TriggerRule, Workflow, topological_order


class TaskRunStatus(StrEnum):
    PENDING = "PENDING"
    SUBMITTED = "SUBMITTED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    CANCELLED = "CANCELLED"


class RunStatus(StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


T = TaskRunStatus
TASK_TERMINAL: frozenset[TaskRunStatus] = frozenset({T.SUCCEEDED, T.FAILED, T.SKIPPED, T.CANCELLED})
RETRYABLE_TASK: frozenset[TaskRunStatus] = frozenset({T.FAILED, T.SKIPPED, T.CANCELLED})


def task_status_of(execution: ExecutionStatus) -> TaskRunStatus:
    """A submitted task's status given its execution's: only terminal executions move it."""
    if execution is ExecutionStatus.SUCCEEDED:
        return T.SUCCEEDED
    if execution is ExecutionStatus.FAILED:
        return T.FAILED
    if execution is ExecutionStatus.CANCELLED:
        return T.CANCELLED
    return T.SUBMITTED


@dataclass(frozen=True)
class Evaluation:
    """What to do now: tasks to submit and to skip (topological order), and the run's status
    once that is done. ``statuses`` is the task statuses after applying it."""

    submit: tuple[str, ...]
    skip: tuple[str, ...]
    run_status: RunStatus
    statuses: Mapping[str, TaskRunStatus]


def trigger_met(rule: TriggerRule, upstream: list[TaskRunStatus]) -> bool:
    """Whether a task runs, once every direct upstream task has finished."""
    if rule is TriggerRule.ALL_DONE:
        return True
    if rule is TriggerRule.ONE_FAILED:
        return T.FAILED in upstream
    return all(s is T.SUCCEEDED for s in upstream)


def evaluate(workflow: Workflow, statuses: Mapping[str, TaskRunStatus]) -> Evaluation:
    """Decide every PENDING task whose upstream tasks have all finished, in topological order so
    that a skip propagates down in one call. Tasks missing from ``statuses`` are PENDING."""
    current = {t.name: statuses.get(t.name, T.PENDING) for t in workflow.tasks}
    submit: list[str] = []
    skip: list[str] = []
    for name in topological_order(workflow):
        if current[name] is not T.PENDING:
            continue
        task = workflow.task(name)
        upstream = [current[d] for d in task.depends_on]
        if not all(s in TASK_TERMINAL for s in upstream):
            continue
        if trigger_met(task.trigger_rule, upstream):
            current[name] = T.SUBMITTED
            submit.append(name)
        else:
            current[name] = T.SKIPPED
            skip.append(name)
    return Evaluation(tuple(submit), tuple(skip), run_status_of(current.values()), current)


def run_status_of(statuses: Iterable[TaskRunStatus]) -> RunStatus:
    """RUNNING while a task is unfinished; then CANCELLED if one was cancelled, FAILED if one
    failed (a clean-up task that ran does not change that), else SUCCEEDED."""
    values = list(statuses)
    if not all(s in TASK_TERMINAL for s in values):
        return RunStatus.RUNNING
    if T.CANCELLED in values:
        return RunStatus.CANCELLED
    if T.FAILED in values:
        return RunStatus.FAILED
    return RunStatus.SUCCEEDED
