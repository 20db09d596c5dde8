"""The error body in the OpenAPI document. Each operation declares the statuses it refuses
with (``refusals``), each with the body the API really sends: ``{"error": {"code", "message",
"details"}}``, all three always present. Any other 4xx or 5xx (405, 413 from the body limit,
500) has the same body: ``4XX`` and ``5XX`` say so for every operation."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from tickwheel.resources.errors import ErrorBody

WHY: dict[int, str] = {
    400: "bad_request: the body is not valid JSON, or a cursor is not one this API returned",
    401: "unauthorized: no API key, or an unknown or revoked one",
    403: "forbidden: the key's scope does not allow the action",
    404: "not_found: no such resource in the key's tenant (or in the shared registry)",
    409: "conflict: the resource's state or version, or a reused idempotency key, refuses it",
    413: "payload_too_large: the body is over the server's limit",
    422: "invalid_input: details lists each bad field as {path, message}",
    503: "unavailable: the database cannot be reached; Retry-After says when to try again",
}

Responses = dict[int | str, dict[str, Any]]


def refusals(*statuses: int) -> Responses:
    """The ``responses=`` of a route: the error body for each status it may refuse with, and
    for 401 and 503, which any route behind an API key may answer."""
    wanted = sorted({*statuses, 401, 503})
    return {status: {"model": ErrorBody, "description": WHY[status]} for status in wanted}


PUBLIC: Responses = {503: {"model": ErrorBody, "description": WHY[503]}}
"""For routes without authentication."""


def document_errors(app: FastAPI) -> None:
    """Makes ``app``'s OpenAPI document declare the error body for every other 4xx and 5xx."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = with_error_body(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def with_error_body(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with FastAPI's own 422 shape, which the API never sends, gone, and ``4XX``
    and ``5XX`` answered by the error body on every operation."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    ref = {"$ref": "#/components/schemas/ErrorBody"}
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            if "HTTPValidationError" in str(responses.get("422", "")):
                responses["422"] = {
                    "description": WHY[422],
                    "content": {"application/json": {"schema": ref}},
                }
            for family, description in (
                ("4XX", "another refusal (e.g. 405): the error body says why"),
                ("5XX", "the server failed (internal) or is unavailable: the error body says why"),
            ):
                responses[family] = {
                    "description": description,
                    "content": {"application/json": {"schema": ref}},
                }
    return schema
