"""Request bodies. Strict types: ``"1"`` is not a version and ``true`` is not a priority."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from tickwheel.api.params import Rfc3339
from tickwheel.domain.submission import SubmitRequest

MAX_BATCH = 1000


class SubmitBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    definitionUri: str = Field(min_length=1, max_length=300)
    definitionVersion: StrictInt | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    executeAt: Rfc3339 | None = None
    priority: StrictInt = 0

    def to_request(self, idempotency_key: str | None) -> SubmitRequest:
        return SubmitRequest(
            definition_uri=self.definitionUri,
            inputs=self.inputs,
            definition_version=self.definitionVersion,
            execute_at=self.executeAt,
            priority=self.priority,
            idempotency_key=idempotency_key,
        )


class BatchItem(SubmitBody):
    idempotencyKey: str | None = None


class BatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[BatchItem] = Field(min_length=1, max_length=MAX_BATCH)
