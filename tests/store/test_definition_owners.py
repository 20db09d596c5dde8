"""Who owns a definition, and which one a name resolves to, in the store's own statements (both
backends): a tenant's own definition of a name wins over the shared one, another tenant's is never
returned, and a tenant may not take a shared name it does not own already."""

from __future__ import annotations

from typing import Any

from tests.factories import T0, definition, stored
from tests.store.test_workflow_store import workflows_of
from tickwheel.store.factory import workflow_view_store_for
from tickwheel.store.protocol import SHARED, Store
from tickwheel.store.workflow_protocol import StoredWorkflow


def _named(rows: list[Any]) -> list[tuple[str, int, str]]:
    return [(r.definition.name, r.definition.version, r.owner) for r in rows]


async def test_a_tenant_resolves_its_own_definition_else_the_shared_one(store: Store) -> None:
    # acme takes the name first; the operator publishes the same name later (which it may).
    assert await store.definition_insert(stored(definition("victim", 2), owner="acme"))
    assert await store.definition_insert(stored(definition("victim", 1)))
    assert await store.definition_insert(stored(definition("own", 1), owner="globex"))

    # acme owns a version of "victim": the name is acme's, the shared v1 is not reachable.
    mine = await store.definition_get("acme", "victim")
    assert mine is not None and (mine.definition.version, mine.owner) == (2, "acme")
    assert await store.definition_get("acme", "victim", 1) is None
    # Every other tenant resolves "victim" to the shared registry: acme's v2 never reaches them.
    for tenant in ("default", "globex"):
        got = await store.definition_get(tenant, "victim")
        assert got is not None and (got.definition.version, got.owner) == (1, SHARED)
        assert await store.definition_get(tenant, "victim", 2) is None
    # Another tenant's own definition is invisible, by name and in lists.
    assert await store.definition_get("acme", "own") is None
    assert await store.definition_get("acme", "own", 1) is None
    assert await store.definition_versions("acme", "own") == []
    assert _named(await store.definition_list("acme")) == [("victim", 2, "acme")]
    assert _named(await store.definition_list("default")) == [("victim", 1, SHARED)]
    assert _named(await store.definition_list("globex")) == [
        ("own", 1, "globex"),
        ("victim", 1, SHARED),
    ]
    # The shared registry alone, as the operator publishes against it.
    assert _named(await store.definition_list(SHARED)) == [("victim", 1, SHARED)]


async def test_versions_are_the_resolved_owners_only(store: Store) -> None:
    assert await store.definition_insert(stored(definition("report", 7), owner="acme"))
    for v in (1, 2, 3):
        assert await store.definition_insert(stored(definition("report", v)))
    assert [s.definition.version for s in await store.definition_versions("acme", "report")] == [7]
    assert [s.definition.version for s in await store.definition_versions("x", "report")] == [
        1,
        2,
        3,
    ]


async def test_a_tenant_may_not_take_a_shared_name(store: Store) -> None:
    assert await store.definition_insert(stored(definition("billing", 1)))
    assert not await store.definition_insert(stored(definition("billing", 2), owner="acme"))
    assert await store.definition_get("acme", "billing", 2) is None
    assert _named(await store.definition_versions("acme", "billing")) == [("billing", 1, SHARED)]


async def test_a_tenant_keeps_its_name_when_the_operator_publishes_it_later(store: Store) -> None:
    assert await store.definition_insert(stored(definition("etl", 1), owner="acme"))
    assert await store.definition_insert(stored(definition("etl", 1)))  # the operator may
    assert await store.definition_insert(stored(definition("etl", 2), owner="acme"))
    got = await store.definition_get("acme", "etl")
    assert got is not None and (got.definition.version, got.owner) == (2, "acme")
    other = await store.definition_get("globex", "etl")
    assert other is not None and (other.definition.version, other.owner) == (1, SHARED)


async def test_the_same_name_and_version_lives_once_per_owner(store: Store) -> None:
    assert await store.definition_insert(stored(definition("job", 1), owner="acme"))
    assert await store.definition_insert(stored(definition("job", 1), owner="globex"))
    assert not await store.definition_insert(stored(definition("job", 1), owner="acme"))


async def test_workflows_resolve_and_reserve_names_like_definitions(store: Store) -> None:
    ws = workflows_of(store)
    doc: dict[str, Any] = {"name": "nightly", "version": 1, "tasks": []}

    def wf(name: str, version: int, owner: str) -> StoredWorkflow:
        return StoredWorkflow(name, version, {**doc, "name": name}, f"h{version}", T0, owner)

    assert await ws.workflow_definition_insert(wf("nightly", 1, SHARED))
    assert await ws.workflow_definition_insert(wf("mine", 1, "acme"))
    assert not await ws.workflow_definition_insert(wf("nightly", 2, "acme"))  # reserved
    assert await ws.workflow_definition_insert(wf("mine", 1, SHARED))  # the operator may
    got = await ws.workflow_definition_get("acme", "mine")
    assert got is not None and got.owner == "acme"
    shared = await ws.workflow_definition_get("globex", "mine")
    assert shared is not None and shared.owner == SHARED
    assert await ws.workflow_definition_get("globex", "nightly", 2) is None
    assert [(w.name, w.owner) for w in await ws.workflow_definition_list("acme")] == [
        ("mine", "acme"),
        ("nightly", SHARED),
    ]
    assert [(w.name, w.owner) for w in await ws.workflow_definition_list("globex")] == [
        ("mine", SHARED),
        ("nightly", SHARED),
    ]
    # A tenant's own workflow never reaches another tenant, in reads or the dashboard's counts.
    assert await ws.workflow_definition_insert(wf("secret", 1, "acme"))
    assert await ws.workflow_definition_get("globex", "secret") is None
    counts = await workflow_view_store_for(store).workflow_view_versions("globex")
    assert [(c.name, c.versions) for c in counts] == [("mine", 1), ("nightly", 1)]
    counts = await workflow_view_store_for(store).workflow_view_versions("acme")
    assert [c.name for c in counts] == ["mine", "nightly", "secret"]
