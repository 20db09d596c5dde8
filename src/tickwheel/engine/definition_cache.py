"""The worker's cache of definitions: a definition version never changes once registered, so
each is read from the store once per worker, whatever the number of its attempts."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from tickwheel.domain.definition_refs import stored_name
from tickwheel.domain.definitions import Definition
from tickwheel.domain.models import Execution
from tickwheel.store.due import DefinitionKey
from tickwheel.store.protocol import StoredDefinition, WorkerStore

_Key = DefinitionKey


class DefinitionCache:
    def __init__(self, store: WorkerStore) -> None:
        self.store = store
        self._definitions: dict[_Key, Definition] = {}
        self._lookups: dict[_Key, asyncio.Future[StoredDefinition | None]] = {}

    def known(self, execution: Execution) -> Definition | None:
        """The definition when it is cached (no await: what nearly every attempt needs)."""
        return self._definitions.get(
            (execution.tenant, execution.definition_uri, execution.definition_version)
        )

    async def get(self, execution: Execution) -> Definition | None:
        # Resolved for the execution's tenant: its own definition of the name, else the shared.
        key = (execution.tenant, execution.definition_uri, execution.definition_version)
        known = self._definitions.get(key)
        if known is not None:
            return known
        # One lookup per definition however many attempts miss the cache at once (a herd's
        # first claim: ten attempts of one definition, ten identical SELECTs before).
        lookup = self._lookups.get(key) or self._lookup(key)
        # Shielded: an attempt cancelled while it waits must not cancel the others' lookup.
        stored = await asyncio.shield(lookup)
        if stored is None:
            return None
        self._definitions[key] = stored.definition
        return stored.definition

    def warm(self, keys: Iterable[_Key]) -> int:
        """Starts reading the definitions of ``keys`` not cached nor being read, without waiting
        (the scheduler beside this worker hands over those of the executions it loaded into its
        wheel, seconds before their instant: a herd's first attempt then finds its definition
        here instead of reading it after its claim). Returns how many reads it started."""
        started = 0
        for key in keys:
            if key not in self._definitions and key not in self._lookups:
                self._lookup(key)
                started += 1
        return started

    def _lookup(self, key: _Key) -> asyncio.Future[StoredDefinition | None]:
        tenant, uri, version = key
        lookup = asyncio.ensure_future(self.store.definition_get(tenant, stored_name(uri), version))
        self._lookups[key] = lookup
        lookup.add_done_callback(lambda done: self._lookup_done(key, done))
        return lookup

    def _lookup_done(self, key: _Key, done: asyncio.Future[StoredDefinition | None]) -> None:
        self._lookups.pop(key, None)
        if done.cancelled():
            return
        if done.exception() is None:  # else retrieved: the waiters (if any) raise it themselves
            stored = done.result()
            if stored is not None:  # kept even when no attempt waited (``warm``)
                self._definitions[key] = stored.definition
