"""What a tenant's services are made of: the store, the tenant, the one clock, the submit limits,
the worker run policy and the definition cache, with their defaults written once. The execution
and definition services and the in-process transport (which makes the services per call from
it) all take it as their constructor, so they cannot disagree about a default."""

from __future__ import annotations

from tickwheel.app.definition_cache import DefinitionCache, definition_cache
from tickwheel.domain.clock import Clock, SystemClock
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.domain.submission import SubmitLimits
from tickwheel.store.protocol import Store


class TenantContext:
    def __init__(
        self,
        store: Store,
        tenant: str,
        clock: Clock | None = None,
        limits: SubmitLimits | None = None,
        run_policy: RunPolicy | None = None,
        cache: DefinitionCache | None = None,
    ) -> None:
        self.store = store
        self.tenant = tenant
        self.clock = clock or SystemClock()
        self.limits = limits or SubmitLimits()
        self.cache = cache or definition_cache(store)
        # Registration refuses what no worker under this policy would run (docs/worker_policy.md).
        self.run_policy = run_policy
