"""The error body of every refused request: ``{"error": {"code", "message", "details"}}``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class FieldProblem(BaseModel):
    """One bad field of a 422 (``invalid_input``)."""

    model_config = ConfigDict(frozen=True)

    path: str = Field(description="where, dotted: inputs.name, cronJobs[3].expression, body")
    message: str


class ErrorDetail(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: str = Field(description="stable and machine-readable, e.g. invalid_input, not_found")
    message: str = Field(description="what is wrong, for a person")
    details: list[FieldProblem] | dict[str, Any] | list[Any] | str | None = Field(
        description="for invalid_input: one {path, message} per bad field; otherwise an object "
        "with facts about the refusal (e.g. the current status or version), or null",
    )


class ErrorBody(BaseModel):
    """Every error answer of the API, whatever its status (4xx and 5xx)."""

    model_config = ConfigDict(frozen=True)

    error: ErrorDetail
