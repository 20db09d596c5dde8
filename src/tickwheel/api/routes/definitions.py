"""Job Definitions: registered in YAML, JSON or XML by a tenant's admin into that tenant, or by
the operator into the shared registry (``?shared=true``); read by any key of the tenant, which
sees its own definitions and the shared ones, never another tenant's (a 404)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from tickwheel.api.auth import Principal, require_operator
from tickwheel.api.deps import principal, transport_for
from tickwheel.api.error_schema import refusals
from tickwheel.api.params import Version
from tickwheel.domain.definition_files import format_from_content_type
from tickwheel.domain.models import Scope
from tickwheel.resources.definitions import Definition, DefinitionList

router = APIRouter(prefix="/v1/definitions", tags=["definitions"])
Who = Annotated[Principal, Depends(principal)]


@router.put(
    "",
    status_code=201,
    response_model=Definition,
    responses={
        200: {"model": Definition, "description": "the same content again: nothing changed"},
        **refusals(400, 403, 409, 413, 422),
    },
)
async def apply_definition(
    request: Request, response: Response, who: Who, shared: bool = False
) -> dict[str, Any]:
    """Registers a definition (Content-Type: application/yaml, application/json or
    application/xml) into the key's tenant, or with ``?shared=true`` into the shared registry
    (operator keys only). The same content again is a no-op (200); a tenant's name that the
    shared registry holds is a 409."""
    who.require(Scope.ADMIN)
    if shared:
        require_operator(who, "definitions")
    fmt = format_from_content_type(request.headers.get("content-type"))
    body = await request.body()
    wire, created = await transport_for(request, who).definition_apply(body, fmt, shared)
    response.status_code = 201 if created else 200
    return wire


@router.get("", response_model=DefinitionList, responses=refusals())
async def list_definitions(request: Request, who: Who) -> dict[str, Any]:
    return {"items": await transport_for(request, who).definition_list()}


@router.get("/{name}", response_model=DefinitionList, responses=refusals(404))
async def definition_versions(name: str, request: Request, who: Who) -> dict[str, Any]:
    return {"items": await transport_for(request, who).definition_versions(name)}


@router.get("/{name}/versions/{version}", response_model=Definition, responses=refusals(404, 422))
async def definition_version(
    name: str, version: Version, request: Request, who: Who
) -> dict[str, Any]:
    return await transport_for(request, who).definition_get(name, version)
