"""A store that records what a worker asks of it: each claim (slots asked, executions got),
each batch of finished attempts reported, and each execution released, with the store's answer.
Shared by the worker's tests of batching, claiming ahead and rate limits."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from tickwheel.domain.models import Execution
from tickwheel.store.engine_protocol import RELEASED_AT_SHUTDOWN
from tickwheel.store.protocol import AttemptResult, Store


class RecordingStore:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.claims: list[tuple[int, int]] = []
        self.batches: list[int] = []
        self.released: list[Execution] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    @property
    def started(self) -> int:
        return sum(got for _, got in self.claims)

    async def execution_claim_ready(
        self,
        worker_id: str,
        limit: int,
        lease: timedelta,
        now: datetime | None = None,
        definition_uris: Sequence[str] | None = None,
    ) -> list[Execution]:
        got = await self.store.execution_claim_ready(worker_id, limit, lease, now, definition_uris)
        self.claims.append((limit, len(got)))
        return got

    async def attempt_finish_many(
        self, results: Sequence[AttemptResult], now: datetime | None = None
    ) -> list[bool]:
        self.batches.append(len(results))
        return await self.store.attempt_finish_many(results, now)

    async def execution_release(
        self,
        execution_id: uuid.UUID,
        fencing_token: int,
        now: datetime | None = None,
        why: str = RELEASED_AT_SHUTDOWN,
    ) -> bool:
        done = await self.store.execution_release(execution_id, fencing_token, now, why)
        if done:
            found = await self.store.execution_get("acme", execution_id)
            assert found is not None
            self.released.append(found)
        return done
