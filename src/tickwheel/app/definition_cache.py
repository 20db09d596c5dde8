"""The definitions the submit path looked up lately, per store, so that a submission costs no
definitions query: at a thousand submissions a second the same few definitions are read over
and over, and the query was one of the five round trips of a single submit.

A stored version never changes (definitions are immutable), but which row a lookup finds can:
the latest version moves when a new one is registered, and a tenant's own definition of a name
would win over the shared one once it exists. So every entry lives ``TTL`` seconds at most (a
definition registered by another process is used by this one's unpinned submissions within
that time), and registering through this process forgets the name at once (so that a submit
right after an apply here sees it). Misses are not cached: a definition registered a moment
after a failed submit is found by the next one.

Entries are keyed by (tenant, name, version or None for the latest), so that the lookup can be
tenant-scoped without changing the cache."""

from __future__ import annotations

import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from tickwheel.store.protocol import Store, StoredDefinition

TTL = 1.0
MAX_ENTRIES = 1024

Key = tuple[str, str, int | None]


class DefinitionCache:
    def __init__(
        self,
        ttl: float = TTL,
        max_entries: int = MAX_ENTRIES,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._monotonic = monotonic
        self._entries: OrderedDict[Key, tuple[float, StoredDefinition]] = OrderedDict()

    def fresh(self, key: Key) -> StoredDefinition | None:
        """The entry of ``key`` while it lives, else None (``get`` then loads it): a lookup
        without a coroutine, for the submission that finds it (nearly every one)."""
        entry = self._entries.get(key)
        if entry is not None and entry[0] > self._monotonic():
            return entry[1]
        return None

    async def get(
        self, key: Key, load: Callable[[], Awaitable[StoredDefinition | None]]
    ) -> StoredDefinition | None:
        now = self._monotonic()
        entry = self._entries.get(key)
        if entry is not None and entry[0] > now:
            return entry[1]
        stored = await load()
        if stored is None:
            self._entries.pop(key, None)
            return None
        self._entries[key] = (now + self.ttl, stored)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return stored

    def forget(self, name: str) -> None:
        """Every entry of ``name``, for every tenant and version."""
        for key in [k for k in self._entries if k[1] == name]:
            del self._entries[key]


_caches: weakref.WeakKeyDictionary[Store, DefinitionCache] = weakref.WeakKeyDictionary()


def definition_cache(store: Store) -> DefinitionCache:
    """The cache of ``store``, shared by every transport over it (the API makes one transport
    per request), and gone with the store."""
    cache = _caches.get(store)
    if cache is None:
        cache = _caches[store] = DefinitionCache()
    return cache
