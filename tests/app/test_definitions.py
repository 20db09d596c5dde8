"""The definition rules as a service, on both backends: registering is created, the same
content again is same (nothing written), other content under the same version a conflict, and
a bad file or a taken shared name changes nothing."""

from __future__ import annotations

import json

import pytest

from tests.factories import T0, definition, definition_doc
from tickwheel.app.definitions import DefinitionService
from tickwheel.app.outcomes import Outcome
from tickwheel.domain.clock import FakeClock
from tickwheel.domain.errors import Conflict, InvalidInput
from tickwheel.store.protocol import SHARED, Store


async def test_apply_is_created_then_same_then_a_conflict(store: Store) -> None:
    clock = FakeClock(T0)
    definitions = DefinitionService(store, "acme", clock)
    first = await definitions.apply(definition())
    assert first.outcome is Outcome.CREATED and first.value.owner == "acme"

    clock.advance(60)
    again = await definitions.apply_file(json.dumps(definition_doc()).encode(), "json")
    assert again.outcome is Outcome.SAME
    assert again.value.created_at == first.value.created_at  # the stored one, not rewritten

    with pytest.raises(Conflict) as conflict:
        await definitions.apply(definition(timeout=60))
    assert conflict.value.details["differingFields"] == ["timeout"]
    [only] = await definitions.versions("greet")
    assert only.content_hash == first.value.content_hash


async def test_a_bad_file_and_a_shared_name_change_nothing(store: Store) -> None:
    operator = DefinitionService(store, SHARED, FakeClock(T0))
    published = await operator.apply(definition("shared-job"), shared=True)
    assert published.created and published.value.owner == SHARED

    acme = DefinitionService(store, "acme", FakeClock(T0))
    with pytest.raises(Conflict, match="shared definition"):
        await acme.apply(definition("shared-job"))
    bad = definition_doc(timeout=-1)
    with pytest.raises(InvalidInput):
        await acme.apply_file(json.dumps(bad).encode(), "json")
    # acme resolves the shared one and has registered nothing of its own.
    assert [(d.definition.name, d.owner) for d in await acme.list()] == [("shared-job", SHARED)]
