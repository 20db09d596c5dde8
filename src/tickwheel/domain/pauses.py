"""Pauses of a tenant or a definition and the records of its circuit breaker (issue 14): plain
data that the store returns, the application layer assembles and the API shows."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from tickwheel.domain.breaker import Breaker, BreakerState
from tickwheel.domain.rate_limits import BucketState

TENANT_WIDE = ""
"""The ``definition_uri`` of a pause of the whole tenant."""


class PauseKind(StrEnum):
    MANUAL = "manual"
    """A person's pause: the API, the SDK, the CLI, the dashboard."""
    BREAKER = "breaker"
    """An open (or half-open) circuit breaker's."""


@dataclass(frozen=True)
class PauseRecord:
    tenant: str
    definition_uri: str
    """``TENANT_WIDE`` ('') for the whole tenant."""
    kind: PauseKind
    reason: str
    paused_at: datetime
    probe_execution_id: uuid.UUID | None = None


@dataclass(frozen=True)
class BreakerRecord:
    tenant: str
    definition_uri: str
    breaker: Breaker
    updated_at: datetime


@dataclass(frozen=True)
class BreakerTransitionRecord:
    tenant: str
    definition_uri: str
    from_state: BreakerState
    to_state: BreakerState
    reason: str
    at: datetime


@dataclass(frozen=True)
class DefinitionFlow:
    """What holds a definition back for this tenant, and its breaker with its latest history."""

    name: str
    pauses: list[PauseRecord]
    """The definition's own pauses and the tenant's: any one of them holds it back."""
    breaker: Breaker | None
    transitions: list[BreakerTransitionRecord]
    rate_limits: list[BucketState] = field(default_factory=list)
    """The buckets its starts draw on for this tenant: its own and the tenant's."""

    @property
    def paused(self) -> bool:
        return bool(self.pauses)


@dataclass(frozen=True)
class TenantFlow:
    tenant: str
    pauses: list[PauseRecord]
    breakers: list[BreakerRecord]
    rate_limits: list[BucketState] = field(default_factory=list)
    """The tenant's own bucket (``TENANT_WIDE``) and its definitions'."""
    weight: int = 1
    """Executions it takes per turn in the fair claim."""

    @property
    def paused(self) -> bool:
        return any(p.definition_uri == TENANT_WIDE for p in self.pauses)
