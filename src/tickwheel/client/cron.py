"""Cron jobs in the SDK: ``client.cron`` on both ``AsyncClient`` and ``Client``.

``CronClient`` holds the logic (async); ``CronSync`` (``cron_sync.py``) is the blocking facade
the sync ``Client`` exposes. Both speak to a ``CronTransport``: the HTTP transport, or the Cron
Service's in-process rules (``tickwheel.cron.jobs.CronJobs``) for code running in the server.

A job targets a Job Definition (``definition``, as a name or ``registry://jobs/<name>``) or a
Workflow (``workflow=``, with ``workflow_version=``), exactly one. A version of None (the
default) means *latest*, resolved again at every occurrence; a number pins it.
"""

from __future__ import annotations

import builtins
import json
import uuid
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, Literal, Protocol, TypedDict, Unpack

from tickwheel.client.transport import Wire
from tickwheel.resources.cron import (
    ApplyResult,
    AuditEntry,
    AuditList,
    Backfill,
    CronJobPage,
    Deleted,
    FireTime,
    OccurrencePage,
    Triggered,
)
from tickwheel.resources.cron import CronJob as CronJobInfo
from tickwheel.resources.cron import Occurrence as OccurrenceInfo

__all__ = [
    "UNSET",
    "ApplyResult",
    "AuditEntry",
    "Backfill",
    "CronChanges",
    "CronClient",
    "CronJobInfo",
    "CronJobPage",
    "CronOptions",
    "Deleted",
    "FireTime",
    "OccurrenceInfo",
    "OccurrencePage",
    "Triggered",
    "load_cron_file",
]


class _Unset(Enum):
    UNSET = "unset"


UNSET = _Unset.UNSET
"""The same as leaving a keyword out: the field is left out of the request (None sends null,
which for a version means *latest* and for a bound means none)."""

Misfire = Literal["skip", "run_once", "catch_up"]
Overlap = Literal["allow", "forbid", "replace"]


class CronOptions(TypedDict, total=False):
    """The keywords ``create`` takes beside the name, target, schedule and inputs (all also
    ``update``'s). Written once: ``create``, ``update`` and their blocking twins take them
    as ``**options``, and type checkers and IDEs see each keyword with its type."""

    definition_version: int | None
    workflow: str | None
    workflow_version: int | None
    dst_policy: dict[str, str] | None
    misfire_policy: Misfire | None
    max_catch_up: int | None
    overlap_policy: Overlap | None
    jitter: int | None
    start_at: datetime | None
    end_at: datetime | None


class CronChanges(CronOptions, total=False):
    """What ``update`` may change: every field of a job."""

    name: str
    definition: str | None
    expression: str
    timezone: str
    inputs: dict[str, Any]


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


def _document(**given: Any) -> Wire:
    doc: Wire = {}
    given = {k: v for k, v in given.items() if v is not UNSET}
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
    if str(path).endswith(".json"):
        data = json.loads(text)
    else:
        import yaml  # only a file read needs it, not every cron call

        data = yaml.safe_load(text)
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
        **options: Unpack[CronOptions],
    ) -> CronJobInfo:
        """``definition`` None and ``workflow="<name>"`` (with ``workflow_version``): each
        occurrence starts a run of that workflow instead of an execution. ``jitter`` is in
        seconds; a keyword not given is left to the API's default. Creating the same job again
        returns it; a different job under the same name raises ``Conflict``; a bad job (both
        targets, neither, an unknown one, inputs that do not fit it) raises ``InvalidInput``."""
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
        return CronJobPage.from_wire(wire)

    async def get(self, ref: str | uuid.UUID) -> CronJobInfo:
        """By id or by name."""
        return CronJobInfo.from_wire(await self.transport.cron_get(str(ref)))

    async def update(
        self, ref: str | uuid.UUID, *, version: int | None = None, **changes: Unpack[CronChanges]
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

    async def delete(self, ref: str | uuid.UUID, version: int | None = None) -> Deleted:
        """The job as it was (``cron_job``); its history goes with it, its audit trail stays."""
        return Deleted.from_wire(await self.transport.cron_delete(str(ref), version))

    async def history(
        self, ref: str | uuid.UUID, cursor: str | None = None, limit: int = 50
    ) -> OccurrencePage:
        """Newest occurrence first."""
        return OccurrencePage.from_wire(await self.transport.cron_history(str(ref), cursor, limit))

    async def audit(self, ref: str | uuid.UUID) -> builtins.list[AuditEntry]:
        """Who changed the job, when, and its spec before and after."""
        return AuditList.from_wire(await self.transport.cron_audit(str(ref))).items

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
    ) -> ApplyResult:
        """Reconciles a list of cron jobs (or a YAML/JSON file of them) by name; returns the
        plan. ``dry_run`` changes nothing; ``prune`` deletes jobs of the same ``label`` (None:
        jobs without one) no longer declared. Every apply carries an idempotency key (a new
        one unless given), the same on each retry: a retry after a timeout gets the first
        try's result back (``replayed``) instead of applying again."""
        docs = load_cron_file(jobs) if isinstance(jobs, str | Path) else jobs
        key = idempotency_key or (None if dry_run else f"apply-{uuid.uuid4()}")
        return ApplyResult.from_wire(
            await self.transport.cron_apply(docs, prune, dry_run, label, key)
        )

    async def trigger(self, ref: str | uuid.UUID, key: str | None = None) -> Triggered:
        """Runs the job now, once, beside its schedule: ``execution_id`` (or
        ``workflow_run_id``).
        ``key`` (a new one per call unless given, the same on a retry) names this trigger: the
        same key again returns the same run."""
        wire = await self.transport.cron_trigger(str(ref), key or f"sdk-{uuid.uuid4()}")
        return Triggered.from_wire(wire)

    async def backfill(self, ref: str | uuid.UUID, start: datetime, end: datetime) -> Backfill:
        """Runs the occurrences of ``[start, end]`` that did not run (at most 1,000, within the
        last 7 days), each under the key the service uses for it; ``items`` says which were
        created and which existed already."""
        return Backfill.from_wire(await self.transport.cron_backfill(str(ref), start, end))
