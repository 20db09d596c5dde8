"""The Store protocol: one interface, two backends (PostgreSQL, SQLite), one conformance suite.

Methods are named entity-first and each is one unit of work (its own transaction). State changes
are guarded: an update names the status it expects and the row count says who won, so a cancel
racing a claim has exactly one winner."""

from __future__ import annotations

from typing import Protocol

from tickwheel.store.engine_protocol import (
    ClaimStore,
    LeaseExpiryStore,
    PromotionStore,
    ShardLeaseStore,
    WorkerRegistryStore,
)
from tickwheel.store.execution_protocol import ApiKeyStore, DefinitionStore, ExecutionStore
from tickwheel.store.flow_protocol import FlowStore, RateLimitStore
from tickwheel.store.records import (
    SHARED,
    AttemptResult,
    InsertOutcome,
    StoredDefinition,
    Topic,
    WorkerInfo,
)
from tickwheel.store.running_protocol import RunningStore

__all__ = [
    "SHARED",
    "ApiKeyStore",
    "AttemptResult",
    "ClaimStore",
    "DefinitionStore",
    "ExecutionStore",
    "InsertOutcome",
    "LeaseExpiryStore",
    "PromotionStore",
    "ReaperStore",
    "SchedulerStore",
    "ShardLeaseStore",
    "SignalStore",
    "Store",
    "StoreLifecycle",
    "StoredDefinition",
    "Topic",
    "WorkerInfo",
    "WorkerRegistryStore",
    "WorkerStore",
]


class StoreLifecycle(Protocol):
    """Opening is the backend's own (a class method); this is the rest of a store's life."""

    dialect: str

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """Raises when the database does not answer."""
        ...

    async def migrate(self) -> list[str]:
        """Applies pending migrations; returns the names applied."""
        ...

    async def migrations_pending(self) -> list[str]: ...


class SignalStore(Protocol):
    """Wake-ups between processes (``Topic``): in process on SQLite, LISTEN/NOTIFY on PostgreSQL."""

    async def wait_for(self, topic: Topic, timeout: float) -> bool:
        """Sleeps until ``topic`` is signalled (True) or ``timeout`` seconds pass (False)."""
        ...

    def hears_all(self) -> bool:
        """Whether every process's signals reach this store's waits now (PostgreSQL while its
        LISTEN is in effect; never on SQLite, whose signals stay in their process). A waiter
        may then poll seldom: its poll is only a net under a signal lost to a dropped
        connection, which wakes every waiter anyway when it drops and again when it is back."""
        ...


class Store(
    StoreLifecycle,
    SignalStore,
    DefinitionStore,
    ExecutionStore,
    ApiKeyStore,
    ClaimStore,
    LeaseExpiryStore,
    PromotionStore,
    ShardLeaseStore,
    WorkerRegistryStore,
    RunningStore,
    FlowStore,
    RateLimitStore,
    Protocol,
):
    """Everything one backend implements; composition roots hold it and hand each service the
    part it uses (the narrower protocols above and below)."""


class SchedulerStore(PromotionStore, ShardLeaseStore, SignalStore, FlowStore, Protocol):
    """What ``engine.scheduler`` uses."""


class WorkerStore(
    ClaimStore, DefinitionStore, WorkerRegistryStore, RunningStore, SignalStore, FlowStore, Protocol
):
    """What ``engine.worker`` uses."""


class ReaperStore(LeaseExpiryStore, DefinitionStore, Protocol):
    """What ``engine.reaper`` uses: expired leases, and the definitions' retry policies."""
