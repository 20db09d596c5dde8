"""Pauses and circuit breakers for one tenant (issue 14, docs/flow-control.md).

A pause is stored, so every worker sees it at its next claim: nothing new of the paused tenant
or definition starts, attempts already running finish, and due executions stay READY (or
SCHEDULED until promoted) instead of failing. A tenant pauses only what it can see: its own
definitions and the shared ones, the latter for its own executions only; another tenant's
definition is unknown here (NotFound), as everywhere else."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tickwheel.domain.clock import Clock, SystemClock, store_now
from tickwheel.domain.definition_refs import is_name, uri_of
from tickwheel.domain.errors import ErrorList, FieldError, InvalidInput, NotFound
from tickwheel.domain.fieldtypes import describe
from tickwheel.domain.jsonvalues import text_problem
from tickwheel.domain.pauses import TENANT_WIDE, DefinitionFlow, TenantFlow
from tickwheel.domain.rate_limits import RateLimitSpec, read_rate_limit
from tickwheel.store.protocol import Store

MAX_REASON = 500
MAX_WEIGHT = 100
TRANSITIONS_SHOWN = 50


def check_reason(reason: str) -> str:
    problem = text_problem(reason)
    if problem is None and len(reason) > MAX_REASON:
        problem = f"must be at most {MAX_REASON} characters, got {len(reason)}"
    if problem is not None:
        raise InvalidInput("the pause reason is invalid", [FieldError("reason", problem)])
    return reason


class FlowService:
    def __init__(self, store: Store, tenant: str, clock: Clock | None = None) -> None:
        self.store = store
        self.tenant = tenant
        self.clock = clock or SystemClock()

    async def _uri(self, name: str) -> str:
        """The URI of a definition this tenant sees; NotFound for any other name (another
        tenant's definitions included: they do not exist for this one)."""
        if not is_name(name) or not await self.store.definition_versions(self.tenant, name):
            raise NotFound(f"no definition named {name!r}")
        return uri_of(name)

    async def pause_definition(self, name: str, reason: str = "") -> DefinitionFlow:
        uri = await self._uri(name)
        await self.store.pause_set(self.tenant, uri, check_reason(reason), self.clock.now())
        return await self._definition(name, uri)

    async def resume_definition(self, name: str) -> DefinitionFlow:
        """Lifts the manual pause (an open breaker's stays: it closes on a probe's success)."""
        uri = await self._uri(name)
        await self.store.pause_clear(self.tenant, uri)
        return await self._definition(name, uri)

    async def definition(self, name: str) -> DefinitionFlow:
        return await self._definition(name, await self._uri(name))

    async def _definition(self, name: str, uri: str) -> DefinitionFlow:
        pauses = [
            p for p in await self.store.pause_list(self.tenant) if p.definition_uri in (uri, "")
        ]
        breakers = await self.store.circuit_breaker_list(self.tenant)
        breaker = next((b.breaker for b in breakers if b.definition_uri == uri), None)
        transitions = await self.store.circuit_breaker_transitions(
            self.tenant, uri, TRANSITIONS_SHOWN
        )
        buckets = [
            b
            for b in await self.store.rate_limit_list(self.tenant, store_now(self.clock))
            if b.definition_uri in (uri, TENANT_WIDE)
        ]
        return DefinitionFlow(name, pauses, breaker, transitions, buckets)

    async def pause_tenant(self, reason: str = "") -> TenantFlow:
        await self.store.pause_set(self.tenant, TENANT_WIDE, check_reason(reason), self.clock.now())
        return await self.tenant_flow()

    async def resume_tenant(self) -> TenantFlow:
        await self.store.pause_clear(self.tenant, TENANT_WIDE)
        return await self.tenant_flow()

    async def limit_tenant_rate(self, body: Any) -> TenantFlow:
        """At most ``limit`` starts per ``period`` for the whole tenant, whatever the definition
        (each definition's own ``rateLimit`` applies too). Setting it again changes the limit
        and keeps the tokens, at most the new burst."""
        spec = check_rate_limit(body)
        await self.store.rate_limit_set(self.tenant, TENANT_WIDE, spec, None, store_now(self.clock))
        return await self.tenant_flow()

    async def unlimit_tenant_rate(self) -> TenantFlow:
        await self.store.rate_limit_clear(self.tenant, TENANT_WIDE)
        return await self.tenant_flow()

    async def tenant_flow(self) -> TenantFlow:
        return TenantFlow(
            self.tenant,
            await self.store.pause_list(self.tenant),
            await self.store.circuit_breaker_list(self.tenant),
            await self.store.rate_limit_list(self.tenant, store_now(self.clock)),
            await self.store.tenant_weight_get(self.tenant),
        )

    async def weigh_tenant(self, weight: Any) -> TenantFlow:
        """The tenant's share of a claim's batch while several tenants have READY work: it takes
        ``weight`` executions per turn (1 to 100; None: back to 1). An operator's decision:
        a tenant that set its own would take the others' share (the API requires an operator
        key)."""
        if weight is not None and (
            isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= MAX_WEIGHT
        ):
            problem = f"must be an integer from 1 to {MAX_WEIGHT}, got {describe(weight)}"
            raise InvalidInput("the tenant weight is invalid", [FieldError("weight", problem)])
        await self.store.tenant_weight_set(self.tenant, weight)
        return await self.tenant_flow()


def check_rate_limit(body: Any) -> RateLimitSpec:
    """A rate limit as the API takes it (the keys of a definition's ``rateLimit``); InvalidInput
    naming each bad field otherwise."""
    errors = ErrorList()
    if not isinstance(body, Mapping):
        errors.add("", "must be an object with limit, and optionally period and burst")
    spec = read_rate_limit(body, "", errors) if isinstance(body, Mapping) else None
    if spec is None:
        items = [FieldError(e.path.lstrip("."), e.message) for e in errors.items]
        raise InvalidInput("the rate limit is invalid", items or errors.items)
    return spec
