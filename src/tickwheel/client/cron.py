"""Cron jobs in the SDK: ``client.cron`` on both ``AsyncClient`` and ``Client``.

``CronClient`` holds the logic (async); ``CronSync`` is the blocking facade the sync ``Client``
exposes, one line per method. Both speak to a ``CronTransport``: the HTTP transport, or the Cron
Service's in-process rules (``tickwheel.cron.jobs.CronJobs``) for code running in the server.

A job targets a Job Definition (``definition``, as a name or ``registry://jobs/<name>``) or a
Workflow (``workflow=``, with ``workflow_version=``), exactly one. A version of None (the
default) means *latest*, resolved again at every occurrence; a number pins it.
"""

from __future__ import annotations

import builtins
import json
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml

from tickwheel.client.cron_wire import Wire

T = TypeVar("T")
Runner = Callable[[Coroutine[Any, Any, T]], T]

# SDK keyword -> API field, for create() and update().
_FIELDS = {
    "name": "name",
    "definition": "definitionUri",
    "definition_version": "definitionVersion",
    "inputs": "inputs",
    "expression": "expression",
    "timezone": "timezone",
    "dst_policy": "dstPolicy",
    "misfire_policy": "misfirePolicy",
    "max_catch_up": "maxCatchUp",
    "overlap_policy": "overlapPolicy",
    "jitter": "jitter",
    "start_at": "startAt",
    "end_at": "endAt",
}


class CronTransport(Protocol):
    async def cron_create(self, doc: Wire) -> tuple[Wire, bool]:
        """The job and whether this call created it (False: the same job existed)."""
        ...

    async def cron_list(self, cursor: str | None, limit: int) -> Wire: ...

    async def cron_get(self, ref: str) -> Wire: ...

    async def cron_update(self, ref: str, doc: Wire) -> Wire: ...

    async def cron_pause(self, ref: str) -> Wire: ...

    async def cron_resume(self, ref: str, catch_up: bool) -> Wire: ...

    async def cron_delete(self, ref: str, version: int | None = None) -> Wire: ...

    async def cron_history(self, ref: str, cursor: str | None, limit: int) -> Wire: ...

    async def cron_audit(self, ref: str) -> Wire: ...

    async def cron_preview(
        self,
        expression: str,
        timezone: str,
        after: datetime | None,
        count: int,
        dst_policy: dict[str, Any] | None = None,
    ) -> Wire: ...

    async def cron_apply(
        self,
        docs: builtins.list[Any],
        prune: bool,
        dry_run: bool,
        label: str | None = None,
        apply_key: str | None = None,
    ) -> Wire: ...

    async def cron_trigger(self, ref: str, key: str | None) -> Wire: ...

    async def cron_backfill(self, ref: str, start: datetime, end: datetime) -> Wire: ...


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


@dataclass(frozen=True)
class FireTime:
    """A fire time in UTC (``at``) and in the job's zone (``local``); ``dst`` says what a DST
    rule did to it (shifted, first, second, repeated, skipped) and ``reason`` why."""

    at: datetime
    local: datetime
    zone: str | None
    fires: bool
    dst: str | None
    reason: str | None

    @classmethod
    def from_wire(cls, w: Wire) -> FireTime:
        at, local = _time(w["at"]), _time(w["local"])
        assert at and local
        return cls(at, local, w.get("zone"), w["fires"], w.get("dst"), w.get("reason"))


@dataclass(frozen=True)
class CronJobInfo:
    cron_job_id: uuid.UUID
    name: str
    definition_uri: str | None
    """None when the job targets a workflow."""
    definition_version: int | None
    expression: str
    timezone: str
    status: str
    version: int
    next_run_at: datetime | None
    next_fire_times: list[FireTime]
    wire: Wire = field(repr=False)
    """Every field as the API sent it (policies, bounds, timestamps)."""
    target: str = "definition"
    """``definition`` or ``workflow``: what each occurrence starts."""
    workflow: str | None = None
    workflow_version: int | None = None

    def to_wire(self) -> Wire:
        return dict(self.wire)

    @classmethod
    def from_wire(cls, w: Wire) -> CronJobInfo:
        return cls(
            cron_job_id=uuid.UUID(w["cronJobId"]),
            name=w["name"],
            definition_uri=w["definitionUri"],
            definition_version=w.get("definitionVersion"),
            expression=w["expression"],
            timezone=w["timezone"],
            status=w["status"],
            version=w["version"],
            next_run_at=_time(w.get("nextRunAt")),
            next_fire_times=[FireTime.from_wire(f) for f in w.get("nextFireTimes") or []],
            wire=w,
            target=w.get("target") or "definition",
            workflow=(w.get("workflow") or {}).get("name"),
            workflow_version=(w.get("workflow") or {}).get("version"),
        )


@dataclass(frozen=True)
class CronJobPage:
    items: list[CronJobInfo]
    next_cursor: str | None


@dataclass(frozen=True)
class OccurrenceInfo:
    """One line of a cron job's history: the execution (or workflow run) an occurrence became,
    or why not."""

    occurrence: datetime
    outcome: str
    execution_id: uuid.UUID | None
    execution_status: str | None
    execute_at: datetime | None
    reason: str | None
    workflow_run_id: uuid.UUID | None = None
    workflow_run_status: str | None = None

    @classmethod
    def from_wire(cls, w: Wire) -> OccurrenceInfo:
        occurrence = _time(w["occurrence"])
        assert occurrence
        execution, run = w.get("executionId"), w.get("workflowRunId")
        return cls(
            occurrence,
            w["outcome"],
            uuid.UUID(execution) if execution else None,
            w.get("executionStatus"),
            _time(w.get("executeAt")),
            w.get("reason"),
            uuid.UUID(run) if run else None,
            w.get("workflowRunStatus"),
        )


@dataclass(frozen=True)
class OccurrencePage:
    items: list[OccurrenceInfo]
    next_cursor: str | None


def _document(**given: Any) -> Wire:
    doc: Wire = {}
    workflow, version = given.pop("workflow", None), given.pop("workflow_version", None)
    if workflow is not None:
        doc["workflow"] = {"name": workflow, "version": version}
    elif version is not None:
        raise ValueError("workflow_version needs workflow= (the workflow's name)")
    for key, value in given.items():
        if isinstance(value, datetime):
            value = value.isoformat()
        doc[_FIELDS[key]] = value
    return doc


def load_cron_file(path: str | Path) -> builtins.list[Any]:
    """The cron jobs of a YAML or JSON file: a list of jobs, or ``{"cronJobs": [...]}``. The
    fields are the API's (camelCase); the API validates them."""
    text = Path(path).read_text("utf-8")
    data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
    if isinstance(data, dict) and "cronJobs" in data:
        data = data["cronJobs"]
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of cron jobs (or a cronJobs: list)")
    return data


class CronClient:
    def __init__(self, transport: CronTransport | None) -> None:
        self._transport = transport

    @property
    def transport(self) -> CronTransport:
        if self._transport is None:
            raise RuntimeError(
                "this client's transport has no cron API: pass cron_transport= (in the server, "
                "tickwheel.cron.jobs.CronJobs) or use the HTTP transport"
            )
        return self._transport

    async def create(
        self,
        name: str,
        definition: str | None,
        expression: str,
        timezone: str = "UTC",
        inputs: dict[str, Any] | None = None,
        **options: Any,
    ) -> CronJobInfo:
        """``definition`` None and ``workflow="<name>"`` (with ``workflow_version``) among the
        options: each occurrence starts a run of that workflow instead of an execution.
        ``options``: definition_version, workflow, workflow_version, dst_policy,
        misfire_policy, max_catch_up, overlap_policy, jitter (seconds), start_at, end_at.
        Creating the same job again returns it; a different job under the same name raises
        ``Conflict``; a bad job (both targets, neither, an unknown one, inputs that do not fit
        it) raises ``InvalidInput``."""
        target = {"definition": definition} if definition is not None else {}
        doc = _document(
            name=name,
            expression=expression,
            timezone=timezone,
            inputs=inputs or {},
            **target,
            **options,
        )
        wire, _ = await self.transport.cron_create(doc)
        return CronJobInfo.from_wire(wire)

    async def list(self, cursor: str | None = None, limit: int = 50) -> CronJobPage:
        wire = await self.transport.cron_list(cursor, limit)
        return CronJobPage([CronJobInfo.from_wire(w) for w in wire["items"]], wire["nextCursor"])

    async def get(self, ref: str | uuid.UUID) -> CronJobInfo:
        """By id or by name."""
        return CronJobInfo.from_wire(await self.transport.cron_get(str(ref)))

    async def update(
        self, ref: str | uuid.UUID, *, version: int | None = None, **changes: Any
    ) -> CronJobInfo:
        """Changes the fields given (create's keywords; ``workflow=`` or ``definition=``
        switches the job to that target); ``version`` guards against a change made since you
        read the job (``Conflict``)."""
        doc = _document(**changes)
        if version is not None:
            doc["version"] = version
        return CronJobInfo.from_wire(await self.transport.cron_update(str(ref), doc))

    async def pause(self, ref: str | uuid.UUID) -> CronJobInfo:
        return CronJobInfo.from_wire(await self.transport.cron_pause(str(ref)))

    async def resume(self, ref: str | uuid.UUID, catch_up: bool = False) -> CronJobInfo:
        return CronJobInfo.from_wire(await self.transport.cron_resume(str(ref), catch_up))

    async def delete(self, ref: str | uuid.UUID, version: int | None = None) -> Wire:
        return await self.transport.cron_delete(str(ref), version)

    async def history(
        self, ref: str | uuid.UUID, cursor: str | None = None, limit: int = 50
    ) -> OccurrencePage:
        """Newest occurrence first."""
        wire = await self.transport.cron_history(str(ref), cursor, limit)
        items = [OccurrenceInfo.from_wire(w) for w in wire["items"]]
        return OccurrencePage(items, wire["nextCursor"])

    async def audit(self, ref: str | uuid.UUID) -> builtins.list[Wire]:
        return list((await self.transport.cron_audit(str(ref)))["items"])

    async def preview(
        self,
        expression: str,
        timezone: str = "UTC",
        after: datetime | None = None,
        count: int = 10,
        dst_policy: dict[str, Any] | None = None,
    ) -> builtins.list[FireTime]:
        wire = await self.transport.cron_preview(expression, timezone, after, count, dst_policy)
        return [FireTime.from_wire(w) for w in wire["items"]]

    async def apply(
        self,
        jobs: builtins.list[Any] | str | Path,
        *,
        prune: bool = False,
        dry_run: bool = False,
        label: str | None = None,
        idempotency_key: str | None = None,
    ) -> Wire:
        """Reconciles a list of cron jobs (or a YAML/JSON file of them) by name; returns the
        plan. ``dry_run`` changes nothing; ``prune`` deletes jobs of the same ``label`` (None:
        jobs without one) no longer declared. Every apply carries an idempotency key (a new
        one unless given), the same on each retry: a retry after a timeout gets the first
        try's result back (``replayed``) instead of applying again."""
        docs = load_cron_file(jobs) if isinstance(jobs, str | Path) else jobs
        key = idempotency_key or (None if dry_run else f"apply-{uuid.uuid4()}")
        return await self.transport.cron_apply(docs, prune, dry_run, label, key)

    async def trigger(self, ref: str | uuid.UUID, key: str | None = None) -> Wire:
        """Runs the job now, once, beside its schedule: ``executionId`` (or ``workflowRunId``).
        ``key`` (a new one per call unless given, the same on a retry) names this trigger: the
        same key again returns the same run."""
        return await self.transport.cron_trigger(str(ref), key or f"sdk-{uuid.uuid4()}")

    async def backfill(self, ref: str | uuid.UUID, start: datetime, end: datetime) -> Wire:
        """Runs the occurrences of ``[start, end]`` that did not run (at most 1,000, within the
        last 7 days), each under the key the service uses for it; ``items`` says which were
        created and which existed already."""
        return await self.transport.cron_backfill(str(ref), start, end)


class CronSync:
    """``Client.cron``: each method runs its ``CronClient`` twin on the client's loop."""

    def __init__(self, run: Runner[Any], inner: CronClient) -> None:
        self._run, self._inner = run, inner

    def create(self, name: str, definition: str | None, expression: str, **kw: Any) -> CronJobInfo:
        result: CronJobInfo = self._run(self._inner.create(name, definition, expression, **kw))
        return result

    def list(self, cursor: str | None = None, limit: int = 50) -> CronJobPage:
        result: CronJobPage = self._run(self._inner.list(cursor, limit))
        return result

    def get(self, ref: str | uuid.UUID) -> CronJobInfo:
        result: CronJobInfo = self._run(self._inner.get(ref))
        return result

    def update(self, ref: str | uuid.UUID, **kw: Any) -> CronJobInfo:
        result: CronJobInfo = self._run(self._inner.update(ref, **kw))
        return result

    def pause(self, ref: str | uuid.UUID) -> CronJobInfo:
        result: CronJobInfo = self._run(self._inner.pause(ref))
        return result

    def resume(self, ref: str | uuid.UUID, catch_up: bool = False) -> CronJobInfo:
        result: CronJobInfo = self._run(self._inner.resume(ref, catch_up))
        return result

    def delete(self, ref: str | uuid.UUID, version: int | None = None) -> Wire:
        result: Wire = self._run(self._inner.delete(ref, version))
        return result

    def history(
        self, ref: str | uuid.UUID, cursor: str | None = None, limit: int = 50
    ) -> OccurrencePage:
        result: OccurrencePage = self._run(self._inner.history(ref, cursor, limit))
        return result

    def audit(self, ref: str | uuid.UUID) -> builtins.list[Wire]:
        result: builtins.list[Wire] = self._run(self._inner.audit(ref))
        return result

    def preview(self, expression: str, **kw: Any) -> builtins.list[FireTime]:
        result: builtins.list[FireTime] = self._run(self._inner.preview(expression, **kw))
        return result

    def apply(self, jobs: builtins.list[Any] | str | Path, **kw: Any) -> Wire:
        result: Wire = self._run(self._inner.apply(jobs, **kw))
        return result

    def trigger(self, ref: str | uuid.UUID, key: str | None = None) -> Wire:
        result: Wire = self._run(self._inner.trigger(ref, key))
        return result

    def backfill(self, ref: str | uuid.UUID, start: datetime, end: datetime) -> Wire:
        result: Wire = self._run(self._inner.backfill(ref, start, end))
        return result
