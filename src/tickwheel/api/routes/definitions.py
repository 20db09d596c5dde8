"""Job Definitions: registered by admins in YAML, JSON or XML, read by anyone with a key."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from tickwheel.api.auth import Principal
from tickwheel.api.deps import principal, transport_for
from tickwheel.api.params import Version
from tickwheel.domain.definition_files import format_from_content_type
from tickwheel.domain.models import Scope

router = APIRouter(prefix="/v1/definitions", tags=["definitions"])
Who = Annotated[Principal, Depends(principal)]


@router.put("", status_code=201)
async def apply_definition(request: Request, response: Response, who: Who) -> dict[str, Any]:
    """Registers a definition (Content-Type: application/yaml, application/json or
    application/xml). The same content again is a no-op (200)."""
    who.require(Scope.ADMIN)
    fmt = format_from_content_type(request.headers.get("content-type"))
    wire, created = await transport_for(request, who).definition_apply(await request.body(), fmt)
    response.status_code = 201 if created else 200
    return wire


@router.get("")
async def list_definitions(request: Request, who: Who) -> dict[str, Any]:
    return {"items": await transport_for(request, who).definition_list()}


@router.get("/{name}")
async def definition_versions(name: str, request: Request, who: Who) -> dict[str, Any]:
    return {"items": await transport_for(request, who).definition_versions(name)}


@router.get("/{name}/versions/{version}")
async def definition_version(
    name: str, version: Version, request: Request, who: Who
) -> dict[str, Any]:
    return await transport_for(request, who).definition_get(name, version)
