"""The store protocols: ``Store`` is exactly the union of the narrow protocols, each backend
implements every one of them (the mixin named for it, where there is one), and every protocol
method has a caller outside the store (a method only tests call belongs to the backend)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from tickwheel.store import (
    engine_protocol,
    execution_protocol,
    flow_protocol,
    protocol,
    running_protocol,
)
from tickwheel.store.postgres.api_keys import PostgresApiKeys
from tickwheel.store.postgres.definitions import PostgresDefinitions
from tickwheel.store.postgres.flow import PostgresFlow
from tickwheel.store.postgres.promotion import PostgresPromotion
from tickwheel.store.postgres.rate_limits import PostgresRateLimits
from tickwheel.store.postgres.running import PostgresRunning
from tickwheel.store.postgres.shard_leases import PostgresShardLeases
from tickwheel.store.postgres.store import PostgresStore
from tickwheel.store.postgres.workers import PostgresWorkerRegistry
from tickwheel.store.sqlite.api_keys import SqliteApiKeys
from tickwheel.store.sqlite.definitions import SqliteDefinitions
from tickwheel.store.sqlite.flow import SqliteFlow
from tickwheel.store.sqlite.promotion import SqlitePromotion
from tickwheel.store.sqlite.rate_limits import SqliteRateLimits
from tickwheel.store.sqlite.running import SqliteRunning
from tickwheel.store.sqlite.shard_leases import SqliteShardLeases
from tickwheel.store.sqlite.store import SqliteStore
from tickwheel.store.sqlite.workers import SqliteWorkerRegistry

SRC = Path(protocol.__file__).parents[1]
PARTS = [
    protocol.StoreLifecycle,
    protocol.SignalStore,
    execution_protocol.DefinitionStore,
    execution_protocol.ExecutionStore,
    execution_protocol.ApiKeyStore,
    engine_protocol.ClaimStore,
    engine_protocol.LeaseExpiryStore,
    engine_protocol.PromotionStore,
    engine_protocol.ShardLeaseStore,
    engine_protocol.WorkerRegistryStore,
    running_protocol.RunningStore,
    flow_protocol.FlowStore,
    flow_protocol.RateLimitStore,
]
MIXINS = {
    execution_protocol.DefinitionStore: (PostgresDefinitions, SqliteDefinitions),
    execution_protocol.ApiKeyStore: (PostgresApiKeys, SqliteApiKeys),
    engine_protocol.PromotionStore: (PostgresPromotion, SqlitePromotion),
    engine_protocol.ShardLeaseStore: (PostgresShardLeases, SqliteShardLeases),
    engine_protocol.WorkerRegistryStore: (PostgresWorkerRegistry, SqliteWorkerRegistry),
    running_protocol.RunningStore: (PostgresRunning, SqliteRunning),
    flow_protocol.FlowStore: (PostgresFlow, SqliteFlow),
    flow_protocol.RateLimitStore: (PostgresRateLimits, SqliteRateLimits),
}


def own_methods(cls: type) -> set[str]:
    return {name for name, v in vars(cls).items() if callable(v) and not name.startswith("_")}


def methods(cls: type) -> set[str]:
    return {m for base in cls.__mro__ if base is not object for m in own_methods(base)}


def test_store_is_exactly_the_union_of_the_parts_and_the_parts_do_not_overlap() -> None:
    assert own_methods(protocol.Store) == set()
    union = [m for part in PARTS for m in own_methods(part)]
    assert len(union) == len(set(union)), "a method belongs to one protocol only"
    assert methods(protocol.Store) == set(union)


@pytest.mark.parametrize("backend", [PostgresStore, SqliteStore])
@pytest.mark.parametrize("part", PARTS, ids=lambda p: p.__name__)
def test_each_backend_implements_each_part(backend: type, part: type) -> None:
    for name in own_methods(part):
        implemented = getattr(backend, name, None)
        assert implemented is not None, f"{backend.__name__} lacks {name}"
        declared = getattr(part, name)
        assert inspect.iscoroutinefunction(implemented) == inspect.iscoroutinefunction(declared)


@pytest.mark.parametrize("part", list(MIXINS), ids=lambda p: p.__name__)
def test_the_mixin_named_for_a_part_implements_it_whole(part: type) -> None:
    for mixin in MIXINS[part]:
        assert own_methods(part) <= methods(mixin), mixin.__name__


def test_every_store_method_has_a_caller_outside_the_store() -> None:
    """A protocol method only tests call widens what every backend must keep: tests call the
    backend's own method instead."""
    callers = "\n".join(
        path.read_text()
        for path in SRC.rglob("*.py")
        if not path.is_relative_to(SRC / "store" / "postgres")
        and not path.is_relative_to(SRC / "store" / "sqlite")
    )
    unused = sorted(
        name for name in methods(protocol.Store) if not re.search(rf"\.{name}\b", callers)
    )
    assert unused == []
