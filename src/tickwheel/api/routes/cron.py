"""Cron Jobs: durable recurrence rules, each occurrence materialised as one Execution of a Job
Definition (``definitionUri``) or one Workflow Run (``workflow: {name, version?}``).

Scopes: any key may read (GET, and the preview); creating, changing, pausing, resuming,
deleting and applying need ``submit`` (a cron job only ever submits executions, which a
``submit`` key may do itself). Jobs are tenant-scoped like executions: another tenant's job is
a 404. A job is named in paths by its id or by its name.

``definitionVersion`` (or ``workflow.version``): null (or ``"latest"``) resolves the latest
version at every occurrence (``definitionVersionPolicy``/``workflowVersionPolicy: latest``); a
number pins that version (``pinned``). Exactly one target: both or neither is a 422, and so is
an unknown definition or workflow, or inputs that do not fit it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Header, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from tickwheel.api.auth import Principal
from tickwheel.api.deps import app_state, principal
from tickwheel.api.error_schema import refusals
from tickwheel.api.params import Int64, JsonObject, Rfc3339, StrictVersion, Text, Version
from tickwheel.cron.jobs import CronJobs
from tickwheel.domain.models import Scope
from tickwheel.resources.cron import (
    ApplyResult,
    AuditList,
    CronJob,
    CronJobPage,
    Deleted,
    OccurrencePage,
    Preview,
)

router = APIRouter(prefix="/v1", tags=["cron"])
Who = Annotated[Principal, Depends(principal)]


class DstPolicyBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    nonexistent: Literal["shift_forward", "skip"] | None = None
    ambiguous: Literal["first", "second", "both"] | None = None


class WorkflowTargetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Text = Field(max_length=128)
    version: StrictVersion | Literal["latest"] | None = None


class CronJobChanges(BaseModel):
    """Every field of a cron job; in a PATCH, only those given change."""

    model_config = ConfigDict(extra="forbid")

    name: Text | None = Field(None, max_length=128)
    definitionUri: Text | None = Field(None, max_length=300)
    definitionVersion: StrictVersion | Literal["latest"] | None = None
    workflow: WorkflowTargetBody | None = Field(
        None, description="start a run of this workflow per occurrence (instead of definitionUri)"
    )
    inputs: JsonObject | None = None
    expression: Text | None = Field(None, max_length=200)
    timezone: Text | None = Field(None, max_length=64)
    dstPolicy: DstPolicyBody | None = None
    misfirePolicy: Literal["skip", "run_once", "catch_up"] | None = None
    maxCatchUp: Int64 | None = None
    overlapPolicy: Literal["allow", "forbid", "replace"] | None = None
    jitter: Int64 | None = Field(None, description="seconds (deterministic per occurrence)")
    startAt: Rfc3339 | None = None
    endAt: Rfc3339 | None = None

    def document(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True, exclude={"version"})


class CronJobBody(CronJobChanges):
    name: Text = Field(max_length=128)
    expression: Text = Field(max_length=200)


class CronJobPatch(CronJobChanges):
    version: StrictVersion | None = Field(
        None, description="the version you read: 409 if the job changed since"
    )


class ResumeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    catchUp: StrictBool = Field(
        False,
        description="true: occurrences missed while paused follow the misfire policy; false: "
        "they are recorded SKIPPED_PAUSED and the job continues from now",
    )


class ApplyBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cronJobs: list[JsonObject] = Field(max_length=100_000)
    prune: StrictBool = False
    dryRun: StrictBool = False
    label: StrictStr | None = Field(None, min_length=1, max_length=200)
    """The file or owner this apply speaks for: ``prune`` deletes only jobs with this label."""


def jobs_for(request: Request, who: Principal) -> CronJobs:
    state = app_state(request)
    actor = f"key:{who.key_id}" if who.key_id else "insecure-no-auth admin"
    return CronJobs(state.cron, state.store, who.tenant, actor, state.clock, state.workflows)


@router.post(
    "/cron-jobs",
    status_code=201,
    response_model=CronJob,
    responses={
        200: {"model": CronJob, "description": "a job of that name with the same settings"},
        **refusals(400, 403, 409, 413, 422),
    },
)
async def create_cron_job(
    body: CronJobBody, request: Request, response: Response, who: Who
) -> dict[str, Any]:
    """201 with the new job and its next fire times; 200 with the existing one when a job of
    that name exists with the same settings (a retried create); 409 when it differs."""
    who.require(Scope.SUBMIT)
    wire, created = await jobs_for(request, who).cron_create(body.document())
    response.status_code = 201 if created else 200
    return wire


@router.get("/cron-jobs", response_model=CronJobPage, responses=refusals(400, 422))
async def list_cron_jobs(
    request: Request,
    who: Who,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> dict[str, Any]:
    """By name; ``nextCursor`` pages on."""
    return await jobs_for(request, who).cron_list(cursor, limit)


@router.post(
    "/cron-jobs/apply",
    response_model=ApplyResult,
    responses=refusals(400, 403, 409, 413, 422),
)
async def apply_cron_jobs(
    body: ApplyBody,
    request: Request,
    who: Who,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> dict[str, Any]:
    """Reconciles declared cron jobs (by name, up to 100,000) with the stored ones and returns
    the plan; ``dryRun`` only plans, ``prune`` deletes stored jobs of the same ``label`` (none:
    jobs without a label) that the list no longer declares. Every document is checked first:
    one invalid document and nothing is applied (422). With an ``Idempotency-Key``, a retry
    returns the first apply's result (``replayed: true``) instead of applying again; 409 if
    the key was used for another apply, or if the first is still running after 30 s."""
    who.require(Scope.SUBMIT)
    return await jobs_for(request, who).cron_apply(
        body.cronJobs, body.prune, body.dryRun, body.label, idempotency_key
    )


@router.get("/cron-jobs/{ref}", response_model=CronJob, responses=refusals(404))
async def get_cron_job(ref: str, request: Request, who: Who) -> dict[str, Any]:
    """The job, with ``nextFireTimes``: the next 5 fire instants in UTC (``at``) and in the
    job's zone (``local``), each marked where a DST rule moved, doubled or skipped it."""
    return await jobs_for(request, who).cron_get(ref)


@router.patch(
    "/cron-jobs/{ref}", response_model=CronJob, responses=refusals(400, 403, 404, 409, 413, 422)
)
async def update_cron_job(
    ref: str, body: CronJobPatch, request: Request, who: Who
) -> dict[str, Any]:
    """Changes the fields given. A change to the expression, zone, dstPolicy or bounds
    recomputes ``nextRunAt`` from now. ``version`` (recommended): 409 if it is not current."""
    who.require(Scope.SUBMIT)
    document = {
        **body.document(),
        **({"version": body.version} if body.version is not None else {}),
    }
    return await jobs_for(request, who).cron_update(ref, document)


@router.post("/cron-jobs/{ref}/pause", response_model=CronJob, responses=refusals(403, 404))
async def pause_cron_job(ref: str, request: Request, who: Who) -> dict[str, Any]:
    """Stops materialising occurrences (idempotent). Those already materialised, at most the
    service's lead (60 s) ahead, still run."""
    who.require(Scope.SUBMIT)
    return await jobs_for(request, who).cron_pause(ref)


@router.post(
    "/cron-jobs/{ref}/resume", response_model=CronJob, responses=refusals(400, 403, 404, 422)
)
async def resume_cron_job(
    ref: str, request: Request, who: Who, body: Annotated[ResumeBody | None, Body()] = None
) -> dict[str, Any]:
    who.require(Scope.SUBMIT)
    catch_up = body.catchUp if body else False
    return await jobs_for(request, who).cron_resume(ref, catch_up)


@router.delete("/cron-jobs/{ref}", response_model=Deleted, responses=refusals(403, 404, 409, 422))
async def delete_cron_job(
    ref: str, request: Request, who: Who, version: Version | None = None
) -> dict[str, Any]:
    """Deletes the job and its history; the audit trail keeps a record. Executions already
    materialised are left as they are."""
    who.require(Scope.SUBMIT)
    return await jobs_for(request, who).cron_delete(ref, version)


@router.get(
    "/cron-jobs/{ref}/executions",
    response_model=OccurrencePage,
    responses=refusals(400, 404, 422),
)
async def cron_job_executions(
    ref: str,
    request: Request,
    who: Who,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> dict[str, Any]:
    """The job's history, newest occurrence first: each occurrence with the execution it became
    (and that execution's status), or the reason it did not become one (skipped by overlap,
    dropped or coalesced by the misfire policy, moved or skipped by a DST rule, paused)."""
    return await jobs_for(request, who).cron_history(ref, cursor, limit)


@router.get("/cron-jobs/{ref}/audit", response_model=AuditList, responses=refusals(404))
async def cron_job_audit(ref: str, request: Request, who: Who) -> dict[str, Any]:
    """Who changed the job, when, and what it was before and after."""
    return await jobs_for(request, who).cron_audit(ref)


@router.get("/cron/preview", response_model=Preview, responses=refusals(422))
async def preview(
    request: Request,
    who: Who,
    expression: Annotated[str, Query(max_length=200)],
    timezone: Annotated[str, Query(max_length=64)] = "UTC",
    after: Annotated[Rfc3339 | None, Query(alias="from")] = None,
    count: Annotated[int, Query(ge=1, le=100)] = 10,
    nonexistent: str | None = None,
    ambiguous: str | None = None,
) -> dict[str, Any]:
    """The next ``count`` fire times of an expression, strictly after ``from`` (default: now),
    with DST marks and reasons; ``nonexistent``/``ambiguous`` set the dstPolicy. Nothing is
    stored; a bad expression or zone is a 422 saying what is wrong."""
    policy = {"nonexistent": nonexistent, "ambiguous": ambiguous}
    return await jobs_for(request, who).cron_preview(expression, timezone, after, count, policy)
