"""Job Definitions as the API shows them."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from tickwheel.resources.base import Instant, ItemList, Resource, omitted_when_none


class Definition(Resource):
    """One version of a Job Definition in its canonical long form, and whose it is (``owner``
    null and ``shared`` true: the operator's shared registry). A literal credential stored
    before secret references were required is never shown."""

    uri: str
    name: str
    version: int
    description: str
    inputs: dict[str, Any] = Field(description="name: {type, required, default, ...}")
    outputs: dict[str, Any]
    execution: dict[str, Any] = Field(description="how it runs: {type, ...} by type")
    timeout: float = Field(description="seconds")
    retry: dict[str, Any] = Field(description="{maxAttempts, baseDelay, maxDelay, retryOn, ...}")
    circuit_breaker: dict[str, Any] | None = omitted_when_none(
        "{consecutiveFailures?, failureRate?, window, coolDown}: left out when none is set"
    )
    start_by: float | None = omitted_when_none(
        "seconds after executeAt: the startBy of a submission that names none"
    )
    deadline: float | None = omitted_when_none(
        "seconds after executeAt: the deadline of a submission that names none"
    )
    concurrency: dict[str, Any] | None = omitted_when_none(
        "{key, limit, order}: at most `limit` of its executions per key run at once"
    )
    rate_limit: dict[str, Any] | None = omitted_when_none(
        "{limit, period, burst?}: at most `limit` of its executions start per period, per tenant"
    )
    content_hash: str
    created_at: Instant
    owner: str | None
    shared: bool


class DefinitionList(ItemList[Definition]):
    """The latest version of each definition, or every version of one."""
