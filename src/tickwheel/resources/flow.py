"""Pauses and circuit breakers as the API shows them (docs/flow-control.md)."""

from __future__ import annotations

import uuid

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

from tickwheel.domain.breaker import Breaker
from tickwheel.domain.definition_refs import stored_name
from tickwheel.domain.pauses import (
    TENANT_WIDE,
    BreakerRecord,
    BreakerTransitionRecord,
    DefinitionFlow,
    PauseRecord,
    TenantFlow,
)
from tickwheel.domain.rate_limits import BucketState
from tickwheel.resources.base import Instant, Resource, omitted_when_none


class Pause(Resource):
    """One thing that holds executions back: a person's pause (``manual``) or an open circuit
    breaker's (``breaker``), of one definition or (``definition`` null) the whole tenant."""

    definition: str | None = Field(description="the definition's name; null: the whole tenant")
    kind: str = Field(description="manual or breaker")
    reason: str
    paused_at: Instant
    probe_execution_id: uuid.UUID | None = omitted_when_none(
        "a half-open breaker's probe: the one execution let through"
    )

    @classmethod
    def of(cls, p: PauseRecord) -> Pause:
        return cls(
            definition=None if p.definition_uri == TENANT_WIDE else stored_name(p.definition_uri),
            kind=str(p.kind),
            reason=p.reason,
            paused_at=p.paused_at,
            probe_execution_id=p.probe_execution_id,
        )


class CircuitBreaker(Resource):
    """A definition's breaker for this tenant."""

    definition: str
    state: str = Field(description="closed, open or half_open")
    consecutive_failures: int
    cool_down_until: Instant | None = omitted_when_none("open: when a probe may go")
    probe_execution_id: uuid.UUID | None = omitted_when_none("half_open: the probe")
    updated_at: Instant | None = omitted_when_none()

    @classmethod
    def of(cls, name: str, b: Breaker, updated_at: Instant | None = None) -> CircuitBreaker:
        return cls(
            definition=name,
            state=str(b.state),
            consecutive_failures=b.consecutive_failures,
            cool_down_until=b.cool_down_until,
            probe_execution_id=b.probe_execution_id,
            updated_at=updated_at,
        )

    @classmethod
    def of_record(cls, r: BreakerRecord) -> CircuitBreaker:
        return cls.of(stored_name(r.definition_uri), r.breaker, r.updated_at)


class BreakerTransition(Resource):
    from_state: str
    to_state: str
    reason: str
    at: Instant

    @classmethod
    def of(cls, t: BreakerTransitionRecord) -> BreakerTransition:
        return cls(from_state=str(t.from_state), to_state=str(t.to_state), reason=t.reason, at=t.at)


class RateLimit(Resource):
    """A token bucket: at most ``limit`` starts per ``period`` seconds, up to ``burst`` at
    once after a quiet spell; ``tokens`` is what it holds now (the starts it would allow at
    once), its current use is ``burst - tokens``."""

    definition: str | None = Field(description="the definition's name; null: the whole tenant")
    limit: int
    period: float = Field(description="seconds")
    burst: int
    tokens: float = Field(description="tokens now (refilled to `at`)")
    at: Instant
    source: str = Field(description="definition (its rateLimit, version N) or api")
    definition_version: int | None = omitted_when_none("the version whose rateLimit it is")

    @classmethod
    def of(cls, b: BucketState) -> RateLimit:
        return cls(
            definition=None if b.definition_uri == TENANT_WIDE else stored_name(b.definition_uri),
            limit=b.spec.limit,
            period=b.spec.period,
            burst=b.spec.capacity,
            tokens=round(b.tokens, 3),
            at=b.at,
            source="api" if b.source_version is None else "definition",
            definition_version=b.source_version,
        )


class DefinitionFlowState(Resource):
    """Whether a definition runs for this tenant: its pauses (its own and the tenant's), its
    circuit breaker and the breaker's latest transitions, newest first."""

    definition: str
    paused: bool
    pauses: list[Pause]
    circuit_breaker: CircuitBreaker | None = omitted_when_none(
        "left out until the definition's breaker counted an attempt"
    )
    transitions: list[BreakerTransition]
    rate_limits: list[RateLimit] = Field(
        default_factory=list, description="the buckets its starts draw on: its own, the tenant's"
    )

    @classmethod
    def of(cls, f: DefinitionFlow) -> DefinitionFlowState:
        return cls(
            definition=f.name,
            paused=f.paused,
            pauses=[Pause.of(p) for p in f.pauses],
            circuit_breaker=None if f.breaker is None else CircuitBreaker.of(f.name, f.breaker),
            transitions=[BreakerTransition.of(t) for t in f.transitions],
            rate_limits=[RateLimit.of(b) for b in f.rate_limits],
        )


class TenantFlowState(Resource):
    """A tenant's pauses (``paused``: the whole tenant is) and its definitions' breakers."""

    tenant: str
    paused: bool
    pauses: list[Pause]
    circuit_breakers: list[CircuitBreaker]
    rate_limits: list[RateLimit] = Field(
        default_factory=list, description="the tenant's own (definition null) and its definitions'"
    )
    weight: int = Field(1, description="executions it takes per turn in the fair claim")

    @classmethod
    def of(cls, f: TenantFlow) -> TenantFlowState:
        return cls(
            tenant=f.tenant,
            paused=f.paused,
            pauses=[Pause.of(p) for p in f.pauses],
            circuit_breakers=[CircuitBreaker.of_record(b) for b in f.breakers],
            rate_limits=[RateLimit.of(b) for b in f.rate_limits],
            weight=f.weight,
        )


class PauseBody(BaseModel):
    """What a pause request may carry (an empty body is a pause without a reason)."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field("", max_length=500, strict=True, description="shown with the pause")


class RateLimitBody(BaseModel):
    """A tenant's rate limit: the keys of a definition's ``rateLimit``. Ranges are checked by
    the application (422 naming the field, nothing changed)."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(strict=True, description="starts per period, 1 to 1,000,000")
    period: StrictInt | StrictFloat | StrictStr = Field(
        1.0, description='seconds, or "1s", "500ms", "1m", "1h"; 1 ms to 1 day'
    )
    burst: int | None = Field(
        None, strict=True, description="starts at once after a quiet spell; the limit if unset"
    )


class WeightBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    weight: StrictInt = Field(description="executions per turn in the fair claim, 1 to 100")
