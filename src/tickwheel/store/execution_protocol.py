"""The protocols of what the API and the SDK's in-process transport ask of a store: definitions,
executions and their history, API keys. Each backend implements ``DefinitionStore`` in
``definitions.py``, ``ApiKeyStore`` in ``api_keys.py``, and ``ExecutionStore`` in ``store.py``
(submission and the guarded changes) with ``history.py`` (attempts, events, outputs, counts,
retention)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterable, Sequence
from datetime import datetime
from typing import Any, Protocol

from tickwheel.domain.models import (
    ApiKey,
    Attempt,
    Execution,
    ExecutionEvent,
    ExecutionFilter,
)
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import NewExecution
from tickwheel.store.caller_protocol import CallerInsert
from tickwheel.store.records import (
    InsertOutcome,
    StoredDefinition,
)


class DefinitionStore(Protocol):
    """The Job Definition registry."""

    # Definitions are immutable: insert never overwrites. They belong to ``owner`` (a tenant, or
    # SHARED). Every read takes the tenant and resolves a name in the store's one statement: the
    # tenant's own definition when it owns any version of the name, else the shared one; another
    # tenant's is never returned. The tenant SHARED resolves to the shared registry alone.
    async def definition_insert(self, stored: StoredDefinition) -> bool:
        """False when (owner, name, version) exists already (whatever its content), or when a
        tenant that owns no version of the name asks for a name of the shared registry."""
        ...

    async def definition_get(
        self, tenant: str, name: str, version: int | None = None
    ) -> StoredDefinition | None:
        """The definition ``name`` resolves to for ``tenant``; ``version=None`` is its latest."""
        ...

    async def definition_list(self, tenant: str) -> list[StoredDefinition]:
        """The latest version of each definition ``tenant`` resolves, by name."""
        ...

    async def definition_versions(self, tenant: str, name: str) -> list[StoredDefinition]:
        """Every version of the definition ``name`` resolves to for ``tenant``."""
        ...


class ExecutionStore(Protocol):
    """Executions as the API sees them: submitted, read, cancelled, replayed, counted, pruned."""

    async def execution_insert_many(self, items: Sequence[NewExecution]) -> list[InsertOutcome]:
        """Inserts in one transaction; uniqueness of (tenant, idempotency_key) is the database's
        constraint, so concurrent identical submissions create one row."""
        ...

    async def execution_insert_one(self, item: NewExecution) -> InsertOutcome:
        """``execution_insert_many([item])``'s one outcome: the same insert, constraint and
        notifications, for a single submission (a backend may take a shorter way for it)."""
        ...

    async def execution_insert_or_existing(
        self, items: Sequence[NewExecution]
    ) -> list[Execution | None]:
        """``execution_insert_many`` for a caller that needs no record of what it inserted
        (a batch answered with ids): per item, None when this call inserted it (the stored row
        is the item), else the execution that already held its (tenant, idempotency key). The
        same statement, constraint and notifications."""
        ...

    async def execution_insert_or_existing_chunks(
        self, chunks: AsyncIterable[Sequence[NewExecution]]
    ) -> list[Execution | None]:
        """``execution_insert_or_existing`` of the chunks' items, in the order given, in one
        transaction (all or nothing), each chunk taken when the store is ready for it: the
        caller makes a chunk while the store writes the previous one. The chunks must come in
        ``lock_order`` (PostgreSQL: each chunk's items after the previous chunk's; a chunk that
        is not is refused with ValueError, nothing written)."""
        ...

    def execution_insert_on(self, items: Sequence[NewExecution]) -> CallerInsert:
        """``execution_insert_many`` as a statement for the caller's connection and transaction
        (transactional submission): same constraint, same outcomes, nothing committed here."""
        ...

    async def execution_get(self, tenant: str, execution_id: uuid.UUID) -> Execution | None: ...

    async def execution_list(
        self,
        tenant: str,
        flt: ExecutionFilter,
        before: uuid.UUID | None,
        limit: int,
    ) -> list[Execution]:
        """Newest first, keyset-paged on the time-ordered id (never OFFSET)."""
        ...

    async def execution_cancel(
        self, tenant: str, execution_id: uuid.UUID, now: datetime
    ) -> Execution | None:
        """Cancels only from SCHEDULED, READY or RETRY_WAIT; None when the guard did not match."""
        ...

    async def execution_cancel_unstarted(
        self, tenant: str, execution_id: uuid.UUID, now: datetime
    ) -> Execution | None:
        """Cancels only from SCHEDULED or READY, never an execution that is or was running
        (a pause of its cron job must not stop work already under way); None otherwise."""
        ...

    async def execution_replay(
        self, tenant: str, execution_id: uuid.UUID, max_attempts: int, now: datetime
    ) -> Execution | None:
        """FAILED -> READY with ``max_attempts`` more attempts on top of those made; None when the
        guard did not match."""
        ...

    async def execution_output_get(self, tenant: str, execution_id: uuid.UUID) -> Any:
        """The output kept by reference (None when there is none)."""
        ...

    async def attempt_list(self, tenant: str, execution_id: uuid.UUID) -> list[Attempt]: ...

    async def execution_event_list(
        self, tenant: str, execution_id: uuid.UUID
    ) -> list[ExecutionEvent]: ...

    async def execution_count_by_status(
        self, finished_since: datetime | None = None
    ) -> dict[ExecutionStatus, int]:
        """How many executions are in each status (every status present, zeros included), over
        all tenants. Non-terminal statuses are counted exactly, through their partial indexes;
        terminal ones only among executions finished at or after ``finished_since`` (None: all
        of them), so that the count stays cheap however much history is kept."""
        ...

    async def execution_prune(self, finished_before: datetime, limit: int) -> int:
        """Deletes up to ``limit`` terminal executions (SUCCEEDED, FAILED, CANCELLED, EXPIRED) that
        finished before ``finished_before``, with their attempts, events and outputs; returns
        how many. One short statement per call: callers loop until a batch comes back short."""
        ...


class ApiKeyStore(Protocol):
    """API keys, stored by hash."""

    async def api_key_insert(self, key: ApiKey, key_hash: str) -> None: ...

    async def api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        """Only keys that are not revoked."""
        ...

    async def api_key_list(self, tenant: str | None = None) -> list[ApiKey]: ...

    async def api_key_revoke(self, key_id: str, now: datetime) -> bool: ...

    async def api_key_count(self) -> int: ...
