"""Conformance tests of definitions and API keys in the store, run on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import timedelta

import psycopg
import pytest

from tests.factories import T0, definition, stored
from tickwheel.domain.models import ApiKey, Scope
from tickwheel.store.factory import open_store
from tickwheel.store.protocol import Store, StoredDefinition

# -- definitions ----------------------------------------------------------------------------------


async def test_definition_insert_is_true_once_then_false(store: Store) -> None:
    assert await store.definition_insert(stored(definition("greet", 1))) is True
    assert await store.definition_insert(stored(definition("greet", 1))) is False


async def test_definitions_are_immutable_even_with_other_content(store: Store) -> None:
    original = stored(definition("greet", 1))
    await store.definition_insert(original)
    other = stored(
        definition("greet", 1, description="Something else", timeout=5), T0 + timedelta(1)
    )
    assert other.content_hash != original.content_hash
    assert await store.definition_insert(other) is False
    assert await store.definition_get("acme", "greet", 1) == original


async def test_definition_round_trip_is_equal(store: Store) -> None:
    d = definition(
        "notify",
        3,
        description="Tell a webhook",
        inputs={
            "message": "string",
            "limit": {"type": "integer", "default": 10, "description": "at most"},
            "tags": {"type": "array", "required": False},
            "when": "datetime",
        },
        outputs={"status": "integer"},
        execution={
            "type": "http",
            "url": "https://example.com/hook",
            "method": "PUT",
            "headers": {"X-Source": "tickwheel"},
        },
        timeout=12.5,
        retry={"maxAttempts": 2, "baseDelay": 0.5, "maxDelay": 10, "retryOn": ["timeout"]},
    )
    original = stored(d, T0 + timedelta(microseconds=123_456))
    assert await store.definition_insert(original)
    got = await store.definition_get("acme", "notify", 3)
    assert got == original
    assert got is not None
    assert got.definition == d
    assert got.content_hash == original.content_hash
    assert got.created_at == original.created_at
    assert got.created_at.utcoffset() == timedelta(0)


async def test_definition_get_latest_or_a_given_version(store: Store) -> None:
    versions = [stored(definition("greet", v, description=f"v{v}")) for v in (1, 3, 2)]
    for s in versions:
        await store.definition_insert(s)
    latest = await store.definition_get("acme", "greet")
    assert latest is not None
    assert latest.definition.version == 3
    assert latest == versions[1]
    for s in versions:
        assert await store.definition_get("acme", "greet", s.definition.version) == s


async def test_definition_get_of_something_missing_is_none(store: Store) -> None:
    assert await store.definition_get("acme", "nope") is None
    await store.definition_insert(stored(definition("greet", 1)))
    assert await store.definition_get("acme", "greet", 2) is None
    assert await store.definition_get("acme", "nope", 1) is None
    assert await store.definition_get("acme", "gree") is None


async def test_definition_list_gives_the_latest_of_each_sorted_by_name(store: Store) -> None:
    assert await store.definition_list("acme") == []
    for name, version in [("zeta", 1), ("alpha", 2), ("mid", 1), ("alpha", 1), ("zeta", 4)]:
        await store.definition_insert(stored(definition(name, version)))
    listed = await store.definition_list("acme")
    assert [(s.definition.name, s.definition.version) for s in listed] == [
        ("alpha", 2),
        ("mid", 1),
        ("zeta", 4),
    ]
    assert listed[0] == await store.definition_get("acme", "alpha")


async def test_definition_versions_ascending(store: Store) -> None:
    assert await store.definition_versions("acme", "greet") == []
    for version in (3, 1, 10, 2):
        await store.definition_insert(stored(definition("greet", version)))
    await store.definition_insert(stored(definition("other", 5)))
    versions = await store.definition_versions("acme", "greet")
    assert [s.definition.version for s in versions] == [1, 2, 3, 10]
    assert all(s.definition.name == "greet" for s in versions)
    assert versions[2] == await store.definition_get("acme", "greet", 3)


# -- API keys -------------------------------------------------------------------------------------


def api_key(key_id: str, tenant: str = "acme", scope: Scope = Scope.SUBMIT, n: int = 0) -> ApiKey:
    return ApiKey(
        key_id=key_id,
        tenant=tenant,
        scope=scope,
        name=f"key {key_id}",
        created_at=T0 + timedelta(seconds=n),
    )


async def test_api_key_insert_and_find_by_hash(store: Store) -> None:
    key = api_key("k1", scope=Scope.ADMIN)
    await store.api_key_insert(key, "hash-1")
    assert await store.api_key_by_hash("hash-1") == key
    assert await store.api_key_by_hash("hash-2") is None
    assert await store.api_key_by_hash("") is None


async def test_api_key_list_is_filtered_by_tenant(store: Store) -> None:
    keys = [
        api_key("k1", "acme", Scope.READ, 0),
        api_key("k2", "globex", Scope.SUBMIT, 1),
        api_key("k3", "acme", Scope.ADMIN, 2),
    ]
    for i, key in enumerate(keys):
        await store.api_key_insert(key, f"hash-{i}")
    assert await store.api_key_list() == keys
    assert await store.api_key_list("acme") == [keys[0], keys[2]]
    assert await store.api_key_list("globex") == [keys[1]]
    assert await store.api_key_list("initech") == []


async def test_api_key_revoke_once(store: Store) -> None:
    key = api_key("k1")
    await store.api_key_insert(key, "hash-1")
    await store.api_key_insert(api_key("k2", n=1), "hash-2")
    revoked_at = T0 + timedelta(hours=1)
    assert await store.api_key_revoke("k1", revoked_at) is True
    assert await store.api_key_revoke("k1", revoked_at + timedelta(hours=1)) is False
    assert await store.api_key_revoke("missing", revoked_at) is False
    assert await store.api_key_by_hash("hash-1") is None
    assert await store.api_key_by_hash("hash-2") is not None
    [listed, _] = await store.api_key_list("acme")
    assert listed.key_id == "k1"
    assert listed.revoked_at == revoked_at  # the first revocation's time is kept


async def test_api_key_count_counts_only_active_keys(store: Store) -> None:
    assert await store.api_key_count() == 0
    for i in range(3):
        await store.api_key_insert(api_key(f"k{i}", tenant=f"t{i}", n=i), f"hash-{i}")
    assert await store.api_key_count() == 3
    await store.api_key_revoke("k1", T0)
    assert await store.api_key_count() == 2
    await store.api_key_revoke("k1", T0)
    assert await store.api_key_count() == 2


def test_stored_definition_equality_is_by_value() -> None:
    """The round-trip tests above rely on StoredDefinition comparing by value."""
    a = stored(definition("greet", 1))
    b = StoredDefinition(definition("greet", 1), a.content_hash, a.created_at, a.owner)
    assert a == b


# Valid names that sort differently by code point (SQLite, Python, the C collation) and by a
# language's rules (punctuation is ignored at first, so "a.c" sorts with "ac").
NAMES_THAT_COLLATE_DIFFERENTLY = ["ab", "a.c", "a-b", "a_b", "a0"]


async def test_lists_sort_names_by_code_point(store: Store) -> None:
    await _assert_code_point_order(store)


async def _assert_code_point_order(store: Store) -> None:
    for name in NAMES_THAT_COLLATE_DIFFERENTLY:
        await store.definition_insert(stored(definition(name, 1)))
    listed = [s.definition.name for s in await store.definition_list("acme")]
    assert listed == sorted(NAMES_THAT_COLLATE_DIFFERENTLY)
    # Keys made in the same instant are listed by key_id, in the same order.
    for i, key_id in enumerate(NAMES_THAT_COLLATE_DIFFERENTLY):
        await store.api_key_insert(api_key(key_id), f"hash-{i}")
    keys = [k.key_id for k in await store.api_key_list()]
    assert keys == sorted(NAMES_THAT_COLLATE_DIFFERENTLY)


@pytest.mark.postgres
async def test_definition_list_order_does_not_depend_on_the_database_collation(
    pg_url: str,
) -> None:
    """On a database with a language collation (en_US.UTF-8 is the default of many installs)
    an ORDER BY name without COLLATE "C" gives ['a_b', 'a-b', 'a.c', 'a0', 'ab']."""
    name = f"tickwheel_icu_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        has_icu = conn.execute("SELECT 1 FROM pg_collation WHERE collname = 'en-x-icu'").fetchone()
        if has_icu is None:
            pytest.skip("this PostgreSQL has no ICU collations")
        conn.execute(
            f'CREATE DATABASE "{name}" TEMPLATE template0'
            " LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
        )
    try:
        store = await open_store(pg_url.rsplit("/", 1)[0] + "/" + name, pool_size=1)
        try:
            await store.migrate()
            await _assert_code_point_order(store)
        finally:
            await store.close()
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
