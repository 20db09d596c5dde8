"""Pauses and circuit breakers in the store (issue 14): part of ``Store``, apart so that the
protocol stays readable. The claim statement reads ``pauses`` (one clause); everything here
writes it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from tickwheel.domain.breaker import BreakerConfig, BreakerState, Transition
from tickwheel.domain.models import Execution
from tickwheel.domain.pauses import (
    TENANT_WIDE,
    BreakerRecord,
    BreakerTransitionRecord,
    PauseKind,
    PauseRecord,
)
from tickwheel.domain.rate_limits import BucketState, RateLimitSpec

__all__ = [
    "TENANT_WIDE",
    "BreakerRecord",
    "BreakerTransitionRecord",
    "DuePasses",
    "FlowStore",
    "PauseKind",
    "PauseRecord",
    "RateLimitStore",
]


class DuePasses(NamedTuple):
    """Which of the passes over every shard would find work now (``flow_passes_due``)."""

    breakers: bool
    """A breaker waits for its probe (``circuit_breaker_probe``)."""
    expiry: bool
    """An unstarted execution is past its startBy or deadline (``execution_expire_due``)."""


class FlowStore(Protocol):
    async def pause_set(
        self, tenant: str, definition_uri: str, reason: str, now: datetime
    ) -> PauseRecord:
        """A manual pause of ``definition_uri`` (``TENANT_WIDE``: the tenant) from now on; a
        second call keeps the first pause (its instant and reason) and returns it."""
        ...

    async def pause_clear(self, tenant: str, definition_uri: str) -> bool:
        """Lifts the manual pause, and wakes the workers so that what it held back is claimed at
        once. False when there was none. A breaker's pause stays."""
        ...

    async def pause_list(self, tenant: str) -> list[PauseRecord]:
        """Every pause of the tenant, manual and breakers', tenant-wide first, then by uri."""
        ...

    async def flow_controls_present(self) -> bool:
        """Whether any pause (manual or a breaker's) or any rate limit exists, of any tenant: a
        herd's instant then needs its rows read one by one to find those these hold back."""
        ...

    async def circuit_breaker_record(
        self,
        tenant: str,
        definition_uri: str,
        config: BreakerConfig,
        execution_id: uuid.UUID,
        failed: bool,
        now: datetime,
    ) -> Transition | None:
        """One finished attempt counted by the definition's breaker (``domain.breaker``), in one
        transaction with the transition it makes, if any: its history row and the breaker's
        pause (written on OPEN, lifted on CLOSED, with a wake-up of the workers)."""
        ...

    async def circuit_breaker_probe(self, now: datetime | None = None) -> list[str]:
        """Every OPEN breaker whose cool-down is over and that has a READY execution becomes
        HALF_OPEN with that execution (the first in claim order) as its probe: the only one
        the claim lets through. Several schedulers may run it at once: each breaker moves once.
        Returns the definition URIs of those that moved; wakes the workers when some did."""
        ...

    async def flow_passes_due(self, now: datetime | None = None) -> DuePasses:
        """Whether ``circuit_breaker_probe`` and ``execution_expire_due`` would find anything at
        ``now`` (else the database's clock), in one read and no transaction."""
        ...

    async def circuit_breaker_list(self, tenant: str) -> list[BreakerRecord]: ...

    async def circuit_breaker_transitions(
        self, tenant: str, definition_uri: str, limit: int
    ) -> list[BreakerTransitionRecord]:
        """The newest first."""
        ...

    async def circuit_breaker_counts(self) -> Sequence[tuple[BreakerState, int]]:
        """Breakers by state across tenants (the /metrics gauge)."""
        ...

    async def execution_expire_due(
        self, now: datetime | None = None, limit: int = 500
    ) -> list[Execution]:
        """SCHEDULED and READY executions that never started and whose startBy or deadline has
        passed (``now``, else the database's clock) end EXPIRED, each with an ``expired``
        history event; at most ``limit``, rows a claim or a cancel holds are left for later.
        Returns the expired executions."""
        ...

    async def execution_expire_claimed(
        self,
        execution_id: uuid.UUID,
        fencing_token: int,
        error: dict[str, Any],
        now: datetime | None = None,
    ) -> bool:
        """RUNNING -> EXPIRED for an execution its worker claimed after its startBy (it does not
        run it); the attempt is ABANDONED with ``error``. False, and nothing written, when the
        token is stale."""
        ...


class RateLimitStore(Protocol):
    """Token buckets (issue 14, ``domain.rate_limits``), which the claim draws on, and tenants'
    weights in the fair claim."""

    async def rate_limit_set(
        self,
        tenant: str,
        definition_uri: str,
        spec: RateLimitSpec,
        definition_version: int | None,
        now: datetime | None = None,
    ) -> None:
        """The bucket of ``definition_uri`` (``TENANT_WIDE``: the tenant's own, set through the
        API with ``definition_version`` None). A new bucket starts full; a changed one keeps its
        tokens, at most the new burst. A definition's bucket follows its newest version: an
        older version's spec changes nothing."""
        ...

    async def rate_limit_sync(
        self,
        tenant: str,
        definition_uri: str,
        version: int,
        spec: RateLimitSpec | None,
        now: datetime | None = None,
    ) -> None:
        """At a submission: the bucket of the definition version submitted, made or changed
        (``spec``) or dropped (None, a version without a limit). Once per process and tenant,
        definition and version: later calls cost nothing."""
        ...

    def rate_limit_synced(self, tenant: str, definition_uri: str, version: int) -> bool:
        """Whether ``rate_limit_sync`` of this version already ran here (a call would do
        nothing): a submission that finds it so need not call it."""
        ...

    async def rate_limit_clear(self, tenant: str, definition_uri: str) -> bool:
        """Removes a bucket (what it held back is claimable at once). False when there was none."""
        ...

    async def rate_limit_list(
        self, tenant: str | None, now: datetime | None = None
    ) -> list[BucketState]:
        """A tenant's buckets (None: every tenant's), tokens refilled to ``now`` (else the
        database's clock)."""
        ...

    async def rate_limit_waiting(self) -> dict[str, int]:
        """READY executions under a rate limit, per definition URI (the /metrics gauge)."""
        ...

    async def tenant_weight_set(self, tenant: str, weight: int | None) -> None:
        """The tenant's weight in the fair claim (it takes ``weight`` executions per turn);
        None: back to 1."""
        ...

    async def tenant_weight_get(self, tenant: str) -> int:
        """1 unless set."""
        ...
