"""The submit path's definition cache: entries live a bounded time, a local apply forgets the
name at once, misses are never kept, and the size is bounded."""

from __future__ import annotations

from tests.factories import definition, stored
from tickwheel.client.transports.definition_cache import DefinitionCache
from tickwheel.store.protocol import StoredDefinition


class Loader:
    """Counts the lookups that reached the store and answers with ``value``."""

    def __init__(self, value: StoredDefinition | None) -> None:
        self.value = value
        self.calls = 0

    async def __call__(self) -> StoredDefinition | None:
        self.calls += 1
        return self.value


class Monotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_an_entry_serves_for_its_ttl_then_is_read_again() -> None:
    clock = Monotonic()
    cache = DefinitionCache(ttl=1.0, monotonic=clock)
    v1, v2 = stored(definition(version=1)), stored(definition(version=2))
    load = Loader(v1)
    assert await cache.get(("acme", "greet", None), load) is v1
    clock.now += 0.99
    assert await cache.get(("acme", "greet", None), load) is v1
    assert load.calls == 1
    # Registered by another process meanwhile: seen once the entry has expired.
    load.value = v2
    clock.now += 0.02
    assert await cache.get(("acme", "greet", None), load) is v2
    assert load.calls == 2


async def test_tenants_and_versions_are_separate_entries() -> None:
    cache = DefinitionCache(monotonic=Monotonic())
    mine, shared = stored(definition(description="mine")), stored(definition())
    assert await cache.get(("acme", "greet", 1), Loader(mine)) is mine
    assert await cache.get(("other", "greet", 1), Loader(shared)) is shared
    assert await cache.get(("acme", "greet", None), Loader(shared)) is shared
    assert await cache.get(("acme", "greet", 1), Loader(None)) is mine


async def test_forget_drops_every_entry_of_the_name_only() -> None:
    cache = DefinitionCache(monotonic=Monotonic())
    greet, other = stored(definition()), stored(definition(name="other"))
    for key in [("acme", "greet", None), ("acme", "greet", 1), ("beta", "greet", 1)]:
        await cache.get(key, Loader(greet))
    await cache.get(("acme", "other", None), Loader(other))
    cache.forget("greet")
    fresh = Loader(greet)
    for key in [("acme", "greet", None), ("acme", "greet", 1), ("beta", "greet", 1)]:
        await cache.get(key, fresh)
    assert fresh.calls == 3
    kept = Loader(None)
    assert await cache.get(("acme", "other", None), kept) is other and kept.calls == 0


async def test_a_miss_is_not_kept() -> None:
    cache = DefinitionCache(monotonic=Monotonic())
    load = Loader(None)
    assert await cache.get(("acme", "greet", None), load) is None
    load.value = stored(definition())
    assert await cache.get(("acme", "greet", None), load) is load.value
    assert load.calls == 2


async def test_the_least_recently_stored_entry_goes_first() -> None:
    cache = DefinitionCache(max_entries=2, monotonic=Monotonic())
    d = stored(definition())
    for version in (1, 2, 3):
        await cache.get(("acme", "greet", version), Loader(d))
    load = Loader(d)
    await cache.get(("acme", "greet", 3), load)
    await cache.get(("acme", "greet", 2), load)
    assert load.calls == 0
    await cache.get(("acme", "greet", 1), load)
    assert load.calls == 1
