"""The error body in the OpenAPI document: ``{"error": {"code", "message", "details"}}``, declared
for every 4xx of every operation in place of FastAPI's own 422 shape."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field


class ErrorDetail(BaseModel):
    code: str = Field(description="stable and machine-readable, e.g. invalid_input")
    message: str = Field(description="what is wrong, for a person")
    details: Any = Field(None, description="for invalid_input: [{path, message}] per bad field")


class ErrorBody(BaseModel):
    """Every error answer of the API, whatever its status."""

    error: ErrorDetail


def document_errors(app: FastAPI) -> None:
    """Makes ``app``'s OpenAPI document declare our error body for every 4xx of every operation."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = with_error_body(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def with_error_body(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with FastAPI's 422 shape, which the API never sends, replaced by the error body
    for every 4xx (so a contract test can hold each error answer to it)."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for model in (ErrorDetail, ErrorBody):
        components[model.__name__] = model.model_json_schema(
            ref_template="#/components/schemas/{model}"
        )
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    body = {
        "description": "the request was refused: the error body says why",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)
            responses["4XX"] = body
    return schema
