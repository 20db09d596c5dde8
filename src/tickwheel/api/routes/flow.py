"""Pauses and circuit breakers (docs/flow-control.md). Pausing and resuming need ``admin``;
reading needs ``read``. A definition another tenant owns is a 404, like an unknown one. The
whole tenant is the key's own; an operator key may name another with ``?tenant=``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from tickwheel.api.auth import Principal
from tickwheel.api.deps import app_state, principal
from tickwheel.api.error_schema import refusals
from tickwheel.app.flow import FlowService
from tickwheel.domain.errors import Forbidden, InvalidInput
from tickwheel.domain.models import Scope
from tickwheel.resources.flow import (
    DefinitionFlowState,
    PauseBody,
    RateLimitBody,
    TenantFlowState,
    WeightBody,
)

router = APIRouter(prefix="/v1", tags=["flow control"])
Who = Annotated[Principal, Depends(principal)]
TenantParam = Annotated[
    str | None, Query(max_length=200, description="operator keys only: another tenant")
]


def _service(request: Request, who: Principal, tenant: str | None = None) -> FlowService:
    state = app_state(request)
    if tenant is not None and tenant != who.tenant:
        if not who.scope.allows(Scope.OPERATOR):
            raise Forbidden(
                f"acting on another tenant needs an operator key (this key has scope "
                f"{who.scope!s}); leave out ?tenant= to act on your own",
                {"scope": str(who.scope), "needed": str(Scope.OPERATOR)},
            )
        if not tenant.strip():
            raise InvalidInput("?tenant= must name a tenant")
    return FlowService(state.store, tenant or who.tenant, state.clock)


@router.post(
    "/definitions/{name}/pause",
    response_model=DefinitionFlowState,
    responses=refusals(403, 404, 422),
)
async def pause_definition(
    name: str, request: Request, who: Who, body: PauseBody | None = None
) -> DefinitionFlowState:
    """Nothing new of this definition starts for the key's tenant until it is resumed; running
    attempts finish; due executions stay READY. Pausing again keeps the first pause."""
    who.require(Scope.ADMIN)
    reason = body.reason if body is not None else ""
    return DefinitionFlowState.of(await _service(request, who).pause_definition(name, reason))


@router.post(
    "/definitions/{name}/resume",
    response_model=DefinitionFlowState,
    responses=refusals(403, 404),
)
async def resume_definition(name: str, request: Request, who: Who) -> DefinitionFlowState:
    """Lifts the pause; what it held back is claimed at once. An open circuit breaker stays
    open (it closes when its probe succeeds)."""
    who.require(Scope.ADMIN)
    return DefinitionFlowState.of(await _service(request, who).resume_definition(name))


@router.get(
    "/definitions/{name}/flow", response_model=DefinitionFlowState, responses=refusals(403, 404)
)
async def definition_flow(name: str, request: Request, who: Who) -> DefinitionFlowState:
    who.require(Scope.READ)
    return DefinitionFlowState.of(await _service(request, who).definition(name))


@router.post("/tenant/pause", response_model=TenantFlowState, responses=refusals(403, 422))
async def pause_tenant(
    request: Request, who: Who, body: PauseBody | None = None, tenant: TenantParam = None
) -> TenantFlowState:
    """Nothing new of the tenant starts, whatever its definition, until it is resumed."""
    who.require(Scope.ADMIN)
    reason = body.reason if body is not None else ""
    return TenantFlowState.of(await _service(request, who, tenant).pause_tenant(reason))


@router.post("/tenant/resume", response_model=TenantFlowState, responses=refusals(403, 422))
async def resume_tenant(request: Request, who: Who, tenant: TenantParam = None) -> TenantFlowState:
    who.require(Scope.ADMIN)
    return TenantFlowState.of(await _service(request, who, tenant).resume_tenant())


@router.get("/tenant/flow", response_model=TenantFlowState, responses=refusals(403, 422))
async def tenant_flow(request: Request, who: Who, tenant: TenantParam = None) -> TenantFlowState:
    """The tenant's pauses and its definitions' circuit breakers."""
    who.require(Scope.READ)
    return TenantFlowState.of(await _service(request, who, tenant).tenant_flow())


@router.put("/tenant/rate-limit", response_model=TenantFlowState, responses=refusals(403, 422))
async def limit_tenant_rate(
    body: RateLimitBody, request: Request, who: Who, tenant: TenantParam = None
) -> TenantFlowState:
    """At most ``limit`` executions of the tenant start per ``period``, whatever their
    definition (a definition's own ``rateLimit`` applies too); one budget for every worker.
    Work over the limit stays READY and starts when tokens return."""
    who.require(Scope.ADMIN)
    raw = body.model_dump(exclude_none=True)
    service = _service(request, who, tenant)
    return TenantFlowState.of(await service.limit_tenant_rate(raw))


@router.delete("/tenant/rate-limit", response_model=TenantFlowState, responses=refusals(403, 422))
async def unlimit_tenant_rate(
    request: Request, who: Who, tenant: TenantParam = None
) -> TenantFlowState:
    """Lifts the tenant's rate limit (definitions' own stay); what it held back starts now."""
    who.require(Scope.ADMIN)
    return TenantFlowState.of(await _service(request, who, tenant).unlimit_tenant_rate())


@router.get("/tenant/rate-limit", response_model=TenantFlowState, responses=refusals(403, 422))
async def tenant_rate(request: Request, who: Who, tenant: TenantParam = None) -> TenantFlowState:
    """The tenant's flow state; ``rateLimits`` holds its bucket and its definitions'."""
    who.require(Scope.READ)
    return TenantFlowState.of(await _service(request, who, tenant).tenant_flow())


@router.put("/tenant/weight", response_model=TenantFlowState, responses=refusals(403, 422))
async def weigh_tenant(
    body: WeightBody, request: Request, who: Who, tenant: TenantParam = None
) -> TenantFlowState:
    """The tenant's share of each claim while several tenants have READY work: ``weight``
    executions per turn (default 1). Operator keys only: a tenant raising its own weight would
    take the others' share."""
    who.require(Scope.OPERATOR)
    return TenantFlowState.of(await _service(request, who, tenant).weigh_tenant(body.weight))


@router.delete("/tenant/weight", response_model=TenantFlowState, responses=refusals(403, 422))
async def unweigh_tenant(request: Request, who: Who, tenant: TenantParam = None) -> TenantFlowState:
    """Back to weight 1 (operator keys only)."""
    who.require(Scope.OPERATOR)
    return TenantFlowState.of(await _service(request, who, tenant).weigh_tenant(None))
