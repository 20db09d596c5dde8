"""Which definition version an unpinned submission through the in-process transport pins, now
that the submit path caches definitions: a version registered here is used at once, one
registered elsewhere once the cache entry expired."""

from __future__ import annotations

import pytest

from tests.factories import T0, definition, stored
from tickwheel.client.transports.definition_cache import TTL, DefinitionCache
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.errors import InvalidInput
from tickwheel.domain.submission import SubmitRequest
from tickwheel.store.protocol import Store

GREET = SubmitRequest(definition_uri="registry://jobs/greet", inputs={"name": "Ada"})


async def _version(transport: InProcessTransport) -> int:
    wire, created = await transport.submit(GREET)
    assert created
    return int(wire["definitionVersion"])


async def test_a_version_registered_in_this_process_is_used_at_once(store: Store) -> None:
    clock = FakeClock(T0)
    transport = InProcessTransport(store, "acme", clock)
    await transport.apply_definition(definition(version=1))
    assert await _version(transport) == 1
    # Another transport over the same store, as the API makes one per request.
    await InProcessTransport(store, "acme", clock).apply_definition(definition(version=2))
    assert await _version(transport) == 2


async def test_a_version_registered_elsewhere_is_used_once_the_entry_expired(
    store: Store,
) -> None:
    transport = InProcessTransport(store, "acme", FakeClock(T0))
    now = [0.0]
    transport.definitions = DefinitionCache(monotonic=lambda: now[0])
    await transport.apply_definition(definition(version=1))
    assert await _version(transport) == 1
    # Written by another process: this one does not hear of it.
    assert await store.definition_insert(stored(definition(version=2), owner="acme"))
    assert await _version(transport) == 1
    now[0] += TTL
    assert await _version(transport) == 2


async def test_an_unknown_definition_is_an_invalid_input_every_time(store: Store) -> None:
    transport = InProcessTransport(store, "acme", FakeClock(T0))
    with pytest.raises(InvalidInput, match="no definition is registered"):
        await transport.submit(GREET)
    await transport.apply_definition(definition(version=1))
    assert await _version(transport) == 1
