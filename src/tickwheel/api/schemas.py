"""Request bodies. Strict types: ``"1"`` is not a version and ``true`` is not a priority."""

from __future__ import annotations

from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictInt

from tickwheel.domain.submission import SubmitRequest

MAX_BATCH = 1000


class SubmitBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    definitionUri: str = Field(min_length=1, max_length=300)  # noqa: N815 - the wire name
    definitionVersion: StrictInt | None = None  # noqa: N815
    inputs: dict[str, Any] = Field(default_factory=dict)
    executeAt: AwareDatetime | None = None  # noqa: N815
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
    idempotencyKey: str | None = None  # noqa: N815


class BatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[BatchItem] = Field(min_length=1, max_length=MAX_BATCH)
