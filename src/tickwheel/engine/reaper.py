"""The reaper: finds RUNNING executions whose lease expired (their worker died, hung or was
partitioned away), marks the attempt ABANDONED and applies the retry policy.

The whole batch is one conditional update, each row guarded twice: by the fencing token it read
(another reaper got there first -> nothing happens) and by the lease still being expired (a
heartbeat that arrived meanwhile wins). Several reapers may run at once."""

from __future__ import annotations

import random
import uuid

from tickwheel.domain.backoff import Uniform
from tickwheel.domain.clock import Clock
from tickwheel.domain.definitions import Definition, RetryPolicy
from tickwheel.domain.models import Execution
from tickwheel.domain.retry import decide_failure
from tickwheel.engine.service import Service
from tickwheel.observability.logs import execution_fields
from tickwheel.store.protocol import AttemptResult, Store


class Reaper(Service):
    name = "reaper"

    def __init__(
        self,
        store: Store,
        clock: Clock | None = None,
        *,
        batch: int = 200,
        interval: float = 1.0,
        uniform: Uniform = random.uniform,
    ) -> None:
        super().__init__(clock)
        self.store = store
        self.batch = batch
        self.interval = interval
        self.uniform = uniform
        self.reaped = 0
        self._definitions: dict[tuple[str, str, int], Definition | None] = {}

    async def run_once(self) -> int:
        """Decides every expired execution of the batch, then writes them all in one
        conditional update; the ones that renewed their lease meanwhile are left alone."""
        expired = await self.store.execution_lease_expired(self.batch, self.store_now())
        results: dict[uuid.UUID, tuple[Execution, AttemptResult]] = {}
        for execution in expired:
            assert execution.fencing_token is not None
            definition = await self._definition(
                execution.tenant, execution.definition_uri, execution.definition_version
            )
            policy = definition.retry if definition else RetryPolicy(max_attempts=1)
            decision = decide_failure(
                "lost",
                execution.attempt_count,
                execution.max_attempts,
                policy,
                self.clock.now(),
                self.uniform,
            )
            results[execution.execution_id] = (
                execution,
                AttemptResult(
                    execution.execution_id,
                    execution.fencing_token,
                    decision.attempt_status,
                    decision.execution_status,
                    error={
                        "kind": "lost",
                        "message": f"the lease of worker {execution.lease_owner} expired",
                        "attempt": execution.attempt_count,
                    },
                    next_attempt_at=decision.next_attempt_at,
                    lease_expired_only=True,
                ),
            )
        if not results:
            return 0
        reaped = await self.store.execution_reap(
            [result for _, result in results.values()], self.store_now()
        )
        for execution_id in reaped:
            execution, result = results[execution_id]
            self.metrics.reaped(execution.definition_uri, str(result.execution_status))
            self.log.warning(
                "attempt %d abandoned: lease of %s expired",
                execution.attempt_count,
                execution.lease_owner,
                extra=execution_fields(execution, execution.lease_owner),
            )
        self.reaped += len(reaped)
        return len(reaped)

    async def idle(self, did: int) -> None:
        await self.pause(0.0 if did >= self.batch else self.interval)

    async def _definition(self, tenant: str, uri: str, version: int) -> Definition | None:
        """The retry policy's source, resolved for the execution's tenant like the worker's."""
        key = (tenant, uri, version)
        if key not in self._definitions:
            stored = await self.store.definition_get(tenant, uri.rsplit("/", 1)[-1], version)
            self._definitions[key] = stored.definition if stored else None
        return self._definitions[key]
