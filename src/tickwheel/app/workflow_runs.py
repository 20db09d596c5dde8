"""Workflow Runs: start, read, cancel, retry, and ``advance`` (evaluate one run and act on it).

Every task run becomes one Execution submitted through ``TaskExecutions`` (the Client SDK of the
run's tenant, or anything with its four calls) with the idempotency key
``wf:<workflowRunId>:<task>`` (``:<retryCount>`` appended once the run was retried), so that a
crash anywhere between submitting and recording resubmits the same key and gets the same
execution back: nothing is ever run twice as two executions. Task-run writes are guarded by the
status they expect; ``evaluate`` is idempotent, so whoever advances a run again repairs what a
crash left half done.

Every task-run write and the run's finish are also guarded by the ``retry_count`` read with the
run: whoever acts on a run acts for one attempt of it. An advancer that stalled across a retry
(it read attempt N, a person retried, the run is at N + 1 with its failed tasks PENDING again)
would otherwise tie a reset task to attempt N's failed execution and fail the retried run
again. Its writes are refused and logged; it stops, since the retry's own advance (or the
sweep) carries attempt N + 1. Only an execution's outcome is read again and recorded for the
current attempt: a task still running when its run ended stays SUBMITTED through a retry, and
its outbox row is the only news of its end.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from typing import Any

from tickwheel.app.outcomes import Outcome, Written
from tickwheel.app.workflow_tasks import (
    RunState,
    TaskExecution,
    TaskExecutions,
    request_hash,
    run_trace,
    task_key,
)
from tickwheel.domain.clock import Clock, SystemClock
from tickwheel.domain.errors import Conflict, InvalidInput, NotFound, TickwheelError
from tickwheel.domain.fieldtypes import validate_values
from tickwheel.domain.ids import uuid7
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.workflow_expressions import UnresolvedReference, resolve
from tickwheel.domain.workflow_runs import (
    RETRYABLE_TASK,
    RunStatus,
    TaskRunStatus,
    evaluate,
    task_status_of,
)
from tickwheel.domain.workflows import Workflow, WorkflowTask, workflow_from_document
from tickwheel.observability.metrics import process_metrics
from tickwheel.observability.tracing import continuing
from tickwheel.store.workflow_protocol import TaskRunRecord, WorkflowRunRecord, WorkflowStore

T = TaskRunStatus
log = logging.getLogger("tickwheel.workflows")

REREADS = 5
"""How often ``finished`` and ``cancel`` read a run again when its attempt changed under them;
each time needs another retry (or end) of the run in between, so a second is already rare."""


class WorkflowRunService:
    """The run rules for one tenant, acting through ``client`` (bound to that tenant)."""

    def __init__(
        self,
        workflows: WorkflowStore,
        client: TaskExecutions,
        tenant: str,
        clock: Clock | None = None,
        cache: dict[tuple[str, str, int], Workflow] | None = None,
    ) -> None:
        self.workflows = workflows
        self.client = client
        self.tenant = tenant
        self.clock = clock or SystemClock()
        self._cache = {} if cache is None else cache

    async def workflow(self, name: str, version: int | None) -> Workflow:
        # Keyed by tenant too: the orchestrator shares one cache across tenants, and a name
        # resolves per tenant (its own workflow, else the shared one).
        if version is not None and (self.tenant, name, version) in self._cache:
            return self._cache[(self.tenant, name, version)]
        stored = await self.workflows.workflow_definition_get(self.tenant, name, version)
        if stored is None:
            which = f" version {version}" if version is not None else ""
            raise NotFound(f"no workflow named {name!r}{which}")
        workflow = workflow_from_document(stored.document)
        self._cache[(self.tenant, workflow.name, workflow.version)] = workflow
        return workflow

    # -- the API's actions ----------------------------------------------------------------------

    async def start_run(
        self,
        name: str,
        version: int | None,
        inputs: dict[str, Any],
        idempotency_key: str | None = None,
    ) -> Written[RunState]:
        """``CREATED`` for a new run (its roots submitted); ``SAME`` (the original run) for the
        same key and body; Conflict (raised) for the same key and another body."""
        digest = request_hash(name, version, inputs)
        if idempotency_key is not None:
            existing = await self._same_key(idempotency_key, digest)
            if existing is not None:
                return Written(Outcome.SAME, await self.run_state(existing.workflow_run_id))
        workflow = await self.workflow(name, version)
        values = validate_values(workflow.inputs, inputs, "inputs", f"of workflow {name}")
        now = self.clock.now()
        run = WorkflowRunRecord(
            workflow_run_id=uuid7(now),
            tenant=self.tenant,
            workflow_name=workflow.name,
            workflow_version=workflow.version,
            inputs=values,
            status=RunStatus.RUNNING,
            idempotency_key=idempotency_key,
            request_hash=digest,
            retry_count=0,
            created_at=now,
            updated_at=now,
        )
        names = [t.name for t in workflow.tasks]
        upstream = {t.name: t.depends_on for t in workflow.tasks}
        if not await self.workflows.workflow_run_insert(run, names, upstream):
            # Another request with this key won the insert between our read and our write.
            assert idempotency_key is not None
            existing = await self._same_key(idempotency_key, digest)
            assert existing is not None
            return Written(Outcome.SAME, await self.run_state(existing.workflow_run_id))
        await self.advance(run.workflow_run_id)
        return Written(Outcome.CREATED, await self.run_state(run.workflow_run_id))

    async def _same_key(self, key: str, digest: str) -> WorkflowRunRecord | None:
        existing = await self.workflows.workflow_run_get_by_key(self.tenant, key)
        if existing is not None and existing.request_hash != digest:
            raise Conflict(
                f"idempotency key {key!r} was used for a different workflow run request",
                {"workflowRunId": str(existing.workflow_run_id)},
            )
        return existing

    async def _run(self, workflow_run_id: uuid.UUID) -> WorkflowRunRecord:
        run = await self.workflows.workflow_run_get(self.tenant, workflow_run_id)
        if run is None:
            raise NotFound(f"no workflow run {workflow_run_id}")
        return run

    async def run_state(self, workflow_run_id: uuid.UUID) -> RunState:
        """The run, its task runs in the workflow's document order (the store's order)."""
        run = await self._run(workflow_run_id)
        return RunState(run, await self.workflows.workflow_task_run_list(workflow_run_id))

    async def cancel_run(self, workflow_run_id: uuid.UUID) -> RunState:
        """Tasks not yet started are cancelled (their executions too); tasks already running
        finish on their own. The run ends CANCELLED; a finished run is a Conflict."""
        for _ in range(REREADS):
            run = await self._run(workflow_run_id)
            if run.status is not RunStatus.RUNNING:
                raise Conflict(f"workflow run {workflow_run_id} is {run.status}, not RUNNING")
            # Finish the run first: from now on nobody submits new tasks for it. Refused when
            # it ended, or ended and was retried, since we read it: then read it again.
            if await self.workflows.workflow_run_finish(
                workflow_run_id, RunStatus.CANCELLED, self.clock.now(), retry_count=run.retry_count
            ):
                break
        else:
            raise Conflict(f"workflow run {workflow_run_id} kept changing; cancel it again")
        for task in await self.workflows.workflow_task_run_list(workflow_run_id):
            await self._cancel_task(run, task)
        return await self.run_state(workflow_run_id)

    async def _cancel_task(self, run: WorkflowRunRecord, task: TaskRunRecord) -> None:
        now = self.clock.now()
        if task.status is T.PENDING:
            if not await self.workflows.workflow_task_run_update(
                task.workflow_run_id,
                task.task_name,
                [T.PENDING],
                T.CANCELLED,
                now,
                retry_count=run.retry_count,
            ):
                await self._superseded(run, f"cancelling task {task.task_name}")
        elif task.status is T.SUBMITTED and task.execution_id is not None:
            try:
                # A running task finishes (a cancel now would ask its worker to stop it).
                if (await self.client.get(task.execution_id)).status is ExecutionStatus.RUNNING:
                    return
                info = await self.client.cancel(task.execution_id)
            except Conflict:
                return  # started (or finished) already: its outcome is recorded when it ends
            # Refused after a retry: the cancellation's outbox row records it for that attempt.
            await self._record(run, task, info)

    async def retry_run(self, workflow_run_id: uuid.UUID) -> RunState:
        """Failed, skipped and cancelled tasks back to PENDING (succeeded ones keep their
        output), the run RUNNING again; their new executions get keys ending ``:<retryCount>``."""
        run = await self._run(workflow_run_id)
        # Which tasks to reset is decided by status inside the retry's transaction (a task that
        # failed a moment ago is reset too); refused if another request retried it meanwhile.
        retried = await self.workflows.workflow_run_retry(
            self.tenant,
            workflow_run_id,
            RETRYABLE_TASK,
            self.clock.now(),
            retry_count=run.retry_count,
        )
        if not retried:
            current = await self._run(workflow_run_id)
            if current.retry_count != run.retry_count:
                raise Conflict(
                    f"workflow run {workflow_run_id} was retried by another request meanwhile "
                    f"(retry {current.retry_count}, {current.status})"
                )
            raise Conflict(
                f"workflow run {workflow_run_id} is {current.status}: only FAILED or CANCELLED "
                "runs can be retried"
            )
        await self.advance(workflow_run_id)
        return await self.run_state(workflow_run_id)

    # -- the orchestrator's actions -------------------------------------------------------------

    async def finished(
        self, workflow_run_id: uuid.UUID, execution_id: uuid.UUID, *, advance: bool = True
    ) -> None:
        """An execution of this run ended: record it on its task run, then advance the run.
        Recorded also when the run is no longer RUNNING (a task that ran on past a cancel), and
        for the current attempt when the run was retried while we read it: a task SUBMITTED
        when its run ended stays so through the retry, and this is the only news of its end."""
        for _ in range(REREADS):
            # The run before its task runs: a retry in between makes the write below refused.
            run = await self.workflows.workflow_run_get(None, workflow_run_id)
            if run is None:
                return
            task = next(
                (
                    t
                    for t in await self.workflows.workflow_task_run_list(workflow_run_id)
                    if t.execution_id == execution_id and t.status is T.SUBMITTED
                ),
                None,
            )
            if task is None:
                break  # recorded already, or the task was reset and resubmitted
            if await self._record(run, task, await self.client.get(execution_id)):
                break
            if not await self._superseded(run, f"recording execution {execution_id}"):
                break  # not final yet, or recorded by someone else meanwhile
        else:
            # The outbox row stays claimed; it comes back once its lease ends.
            raise RuntimeError(f"workflow run {workflow_run_id} kept being retried")
        if advance:
            await self.advance(workflow_run_id)

    async def _record(
        self, run: WorkflowRunRecord, task: TaskRunRecord, info: TaskExecution
    ) -> bool:
        """A SUBMITTED task takes its execution's final status and output, for the attempt of
        ``run``. False when the execution is not final or the guarded write was refused."""
        status = task_status_of(info.status)
        if status is T.SUBMITTED:
            return False
        output = info.output
        if info.output_reference is not None:
            output = await self.client.output(info.execution_id)
        return await self.workflows.workflow_task_run_update(
            task.workflow_run_id,
            task.task_name,
            [T.SUBMITTED],
            status,
            self.clock.now(),
            output=output,
            error=info.error,
            retry_count=run.retry_count,
        )

    async def _superseded(self, run: WorkflowRunRecord, doing: str) -> bool:
        """After a refused write: True (and logged) when the run was retried since ``run`` was
        read, so what we were doing was for an attempt that is over."""
        current = await self.workflows.workflow_run_get(None, run.workflow_run_id)
        if current is not None and current.retry_count == run.retry_count:
            return False
        process_metrics().workflow_stale_writes.inc()
        log.warning(
            "workflow run %s was retried meanwhile (retry %d, now %s): %s for retry %d was "
            "refused and changed nothing",
            run.workflow_run_id,
            run.retry_count,
            "gone" if current is None else current.retry_count,
            doing,
            run.retry_count,
        )
        return True

    async def advance(self, workflow_run_id: uuid.UUID) -> None:
        """Evaluates the run and acts until nothing more changes: skips, submissions, the end.
        Only RUNNING runs move; doing it twice changes nothing the second time."""
        run = await self.workflows.workflow_run_get(None, workflow_run_id)
        if run is None or run.status is not RunStatus.RUNNING:
            return
        workflow = await self.workflow(run.workflow_name, run.workflow_version)
        while True:
            tasks = {
                t.task_name: t
                for t in await self.workflows.workflow_task_run_list(run.workflow_run_id)
            }
            plan = evaluate(workflow, {name: t.status for name, t in tasks.items()})
            now = self.clock.now()
            refused = False
            for name in plan.skip:
                refused |= not await self.workflows.workflow_task_run_update(
                    run.workflow_run_id,
                    name,
                    [T.PENDING],
                    T.SKIPPED,
                    now,
                    retry_count=run.retry_count,
                )
            changed = bool(plan.skip)
            # Later tasks continue the trace of the run's first ones (docs/tracing.md).
            with continuing(await run_trace(self.workflows, run, tasks) if plan.submit else None):
                for name in plan.submit:
                    submitted = await self._submit(run, workflow.task(name), tasks)
                    changed |= submitted
                    refused |= not submitted
            # A refused write is usually another advancer's win; after a retry it is ours to
            # stop: every later write of this attempt would be refused too.
            if refused and await self._superseded(run, "advancing"):
                return
            if not changed:
                break
        if (
            plan.run_status is not RunStatus.RUNNING
            and not await self.workflows.workflow_run_finish(
                run.workflow_run_id, plan.run_status, now, retry_count=run.retry_count
            )
        ):
            await self._superseded(run, f"ending the run {plan.run_status}")

    async def _submit(
        self, run: WorkflowRunRecord, task: WorkflowTask, tasks: dict[str, TaskRunRecord]
    ) -> bool:
        """Submits one ready task; True when its task run changed status."""
        outputs = {
            n: t.output if isinstance(t.output, dict) else {}
            for n, t in tasks.items()
            if t.status is T.SUCCEEDED
        }
        update = self.workflows.workflow_task_run_update
        try:
            inputs = resolve(dict(task.inputs), run.inputs, outputs)
            info = await self.client.submit(
                task.definition_uri,
                inputs,
                idempotency_key=task_key(run, task.name),
                version=task.definition_version,
            )
        except (UnresolvedReference, InvalidInput, NotFound, Conflict) as exc:
            # The task cannot run as declared (a missing or ill-typed upstream output): it
            # fails, and the trigger rules of the tasks below it decide what happens next.
            error = {"type": type(exc).__name__, "message": str(exc)}
            if isinstance(exc, TickwheelError) and exc.details is not None:
                error["details"] = exc.details
            return await update(
                run.workflow_run_id,
                task.name,
                [T.PENDING],
                T.FAILED,
                self.clock.now(),
                error=error,
                retry_count=run.retry_count,
            )
        submitted = await update(
            run.workflow_run_id,
            task.name,
            [T.PENDING],
            T.SUBMITTED,
            self.clock.now(),
            execution_id=info.execution_id,
            retry_count=run.retry_count,
        )
        if not submitted:
            current = {
                t.task_name: t
                for t in await self.workflows.workflow_task_run_list(run.workflow_run_id)
            }.get(task.name)
            orphan = current is None or (
                current.status is T.CANCELLED or current.execution_id != info.execution_id
            )
            if orphan and not info.finished:
                # No task run holds this execution: the run was cancelled while we submitted,
                # or retried since we read it (our key is an old attempt's). Take it back.
                with contextlib.suppress(Conflict):
                    await self.client.cancel(info.execution_id)
            return False
        if info.finished:
            # Resubmitted after a crash, and already done: its event may be gone, record it now
            # (for the run's current attempt, should it have been retried meanwhile).
            await self.finished(run.workflow_run_id, info.execution_id, advance=False)
        return True
