"""Workflows and Workflow Runs.

Scopes as for definitions and executions: registering a workflow needs ``admin`` (into the key's
tenant) or ``operator`` (``?shared=true``, into the shared registry); starting, cancelling and
retrying runs need ``submit``; any key may read. Workflow Definitions are owned and resolved like
Job Definitions: a tenant sees its own and the shared ones, another tenant's is a 404. Runs are
tenant-scoped too. Runs act through an in-process client bound to the caller's tenant, so every
task execution obeys the API's rules.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from tickwheel.api.auth import Principal, require_operator
from tickwheel.api.deps import app_state, principal, transport_for
from tickwheel.api.error_schema import refusals
from tickwheel.api.params import JsonObject, StrictVersion, Text, Version
from tickwheel.client.client import AsyncClient
from tickwheel.domain.definition_files import format_from_content_type
from tickwheel.domain.models import Scope
from tickwheel.resources.workflows import WorkflowDefinition, WorkflowList, WorkflowRun
from tickwheel.workflows.definitions import WorkflowDefinitions
from tickwheel.workflows.runs import WorkflowRuns

router = APIRouter(prefix="/v1", tags=["workflows"])
Who = Annotated[Principal, Depends(principal)]


class RunBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workflow: Text = Field(max_length=128)
    version: StrictVersion | None = None
    inputs: JsonObject = Field(default_factory=dict)


def definitions_for(request: Request, tenant: str) -> WorkflowDefinitions:
    state = app_state(request)
    return WorkflowDefinitions(state.workflows, state.store, tenant, state.clock)


def runs_for(request: Request, who: Principal) -> WorkflowRuns:
    state = app_state(request)
    client = AsyncClient(transport=transport_for(request, who), clock=state.clock)
    return WorkflowRuns(state.workflows, client, who.tenant, state.clock)


@router.put(
    "/workflows",
    status_code=201,
    response_model=WorkflowDefinition,
    responses={
        200: {"model": WorkflowDefinition, "description": "the same content again"},
        **refusals(400, 403, 409, 413, 422),
    },
)
async def apply_workflow(
    request: Request, response: Response, who: Who, shared: bool = False
) -> dict[str, Any]:
    """Registers a Workflow Definition (Content-Type: application/yaml or application/json)
    into the key's tenant, or with ``?shared=true`` into the shared registry (operator keys):
    201 when new, 200 for the same content again, 409 naming the fields that differ (or for a
    shared name), 422 listing every problem (cycles, unknown tasks or definitions, undeclared
    outputs, types)."""
    who.require(Scope.ADMIN)
    if shared:
        require_operator(who, "workflows")
    fmt = format_from_content_type(request.headers.get("content-type"))
    body = await request.body()
    wire, created = await definitions_for(request, who.tenant).apply(body, fmt, shared)
    response.status_code = 201 if created else 200
    return wire


@router.get("/workflows", response_model=WorkflowList, responses=refusals())
async def list_workflows(request: Request, who: Who) -> dict[str, Any]:
    """The latest version of each workflow, by name."""
    return {"items": await definitions_for(request, who.tenant).list()}


@router.get("/workflows/{name}", response_model=WorkflowDefinition, responses=refusals(404, 422))
async def get_workflow(
    name: str, request: Request, who: Who, version: Version | None = None
) -> dict[str, Any]:
    """The latest version, or ``?version=``."""
    return await definitions_for(request, who.tenant).get(name, version)


@router.post(
    "/workflow-runs",
    status_code=201,
    response_model=WorkflowRun,
    responses={
        200: {"model": WorkflowRun, "description": "the same key and body: the original run"},
        **refusals(400, 403, 409, 413, 422),
    },
)
async def start_run(
    body: RunBody,
    request: Request,
    response: Response,
    who: Who,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=255)] = None,
) -> dict[str, Any]:
    """201 with the new run (``workflowRunId``); 200 with the original for the same key and
    body; 409 for the same key and another body."""
    who.require(Scope.SUBMIT)
    runs = runs_for(request, who)
    wire, created = await runs.start(body.workflow, body.version, body.inputs, idempotency_key)
    response.status_code = 201 if created else 200
    return wire


@router.get(
    "/workflow-runs/{workflow_run_id}", response_model=WorkflowRun, responses=refusals(404, 422)
)
async def get_run(workflow_run_id: uuid.UUID, request: Request, who: Who) -> dict[str, Any]:
    """The run and each task run's status, execution id and output."""
    return await runs_for(request, who).get(workflow_run_id)


@router.delete(
    "/workflow-runs/{workflow_run_id}",
    response_model=WorkflowRun,
    responses=refusals(403, 404, 409, 422),
)
async def cancel_run(workflow_run_id: uuid.UUID, request: Request, who: Who) -> dict[str, Any]:
    """Cancels tasks not yet started; the run ends CANCELLED (409 if it already ended)."""
    who.require(Scope.SUBMIT)
    return await runs_for(request, who).cancel(workflow_run_id)


@router.post(
    "/workflow-runs/{workflow_run_id}/retry",
    response_model=WorkflowRun,
    responses=refusals(403, 404, 409, 422),
)
async def retry_run(workflow_run_id: uuid.UUID, request: Request, who: Who) -> dict[str, Any]:
    """Re-runs failed, skipped and cancelled tasks, keeping succeeded ones (409 unless the run
    is FAILED or CANCELLED)."""
    who.require(Scope.SUBMIT)
    return await runs_for(request, who).retry(workflow_run_id)
