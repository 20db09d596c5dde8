"""Cron Jobs on an operator's demand (``cron/manual.py``): ``POST /v1/cron-jobs/{ref}/trigger``
runs the job now, once, beside its schedule; ``POST /v1/cron-jobs/{ref}/backfill`` runs the
occurrences of a past range that did not run, each under its own key. Both need ``submit``, like
any other change to a cron job, and both go through the same submission rules as the API."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictStr

from tickwheel.api.auth import Principal
from tickwheel.api.deps import app_state, principal, transport_for
from tickwheel.api.error_schema import refusals
from tickwheel.api.inprocess_workflows import InProcessWorkflowsTransport
from tickwheel.api.routes.cron import jobs_for
from tickwheel.client.client import AsyncClient
from tickwheel.domain.models import Scope
from tickwheel.resources.cron import Backfill, Triggered

router = APIRouter(prefix="/v1", tags=["cron"])
Who = Annotated[Principal, Depends(principal)]


class TriggerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: StrictStr | None = Field(None, min_length=1, max_length=100)
    """The caller's token for this trigger: the same again returns the same run."""


class BackfillBody(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    start: AwareDatetime = Field(alias="from")
    end: AwareDatetime = Field(alias="to")


def _client(request: Request, who: Principal) -> AsyncClient:
    """An in-process client of the caller's tenant, with the workflow API (a job may start
    workflow runs)."""
    state = app_state(request)
    transport = transport_for(request, who)
    runs = InProcessWorkflowsTransport(state.workflows, transport, state.clock)
    return AsyncClient(transport=transport, clock=state.clock, workflows_transport=runs)


@router.post(
    "/cron-jobs/{ref}/trigger",
    response_model=Triggered,
    responses=refusals(400, 403, 404, 409, 413, 422),
)
async def trigger_cron_job(
    ref: str, request: Request, who: Who, body: Annotated[TriggerBody | None, Body()] = None
) -> dict[str, Any]:
    """One extra run now, with its own key (``cron-now:<cronJobId>:<key>``); the same ``key``
    again returns the same execution (or workflow run). The history row says who asked."""
    who.require(Scope.SUBMIT)
    key = body.key if body else None
    return await jobs_for(request, who).cron_trigger(ref, key, _client(request, who))


@router.post(
    "/cron-jobs/{ref}/backfill",
    response_model=Backfill,
    responses=refusals(400, 403, 404, 409, 413, 422),
)
async def backfill_cron_job(
    ref: str, request: Request, who: Who, body: BackfillBody
) -> dict[str, Any]:
    """Runs every occurrence of the schedule in ``[from, to]`` (at most 1,000, within the last
    7 days, not in the future) under the key the service uses for it: an occurrence that ran
    already is listed ``created: false`` and not run again."""
    who.require(Scope.SUBMIT)
    jobs = jobs_for(request, who)
    return await jobs.cron_backfill(ref, body.start, body.end, _client(request, who))
