"""API keys: ``tw_<key id>_<secret>``, stored as a SHA-256 hash (the secret is 32 random bytes,
so a fast hash is safe; nothing here is a password). The key's tenant scopes every query."""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from tickwheel.domain.errors import Forbidden, Unauthorized
from tickwheel.domain.models import ApiKey, Scope
from tickwheel.store.protocol import Store

PREFIX = "tw_"


@dataclass(frozen=True)
class Principal:
    tenant: str
    scope: Scope
    key_id: str | None

    def require(self, needed: Scope) -> None:
        if not self.scope.allows(needed):
            raise Forbidden(
                f"this API key has scope {self.scope!s}; the action needs {needed!s}",
                {"scope": str(self.scope), "needed": str(needed)},
            )


def require_operator(who: Principal, what: str) -> None:
    """Publishing to the shared registry changes what every tenant may run: the operator's
    scope, which no tenant admin has."""
    if not who.scope.allows(Scope.OPERATOR):
        raise Forbidden(
            f"publishing shared {what} needs an operator key (this key has scope {who.scope!s}); "
            f"register into your own tenant without ?shared=true, or ask the operator",
            {"scope": str(who.scope), "needed": str(Scope.OPERATOR)},
        )


def hash_key(secret_key: str) -> str:
    return hashlib.sha256(secret_key.encode()).hexdigest()


async def create_key(
    store: Store, tenant: str, scope: Scope, name: str, now: datetime
) -> tuple[ApiKey, str]:
    """Returns the stored key and the secret text, which exists nowhere else afterwards."""
    if not tenant.strip():
        # '' is the owner of the shared registry: a key of that "tenant" would write to it.
        raise ValueError("an API key needs a tenant name")
    key_id = secrets.token_hex(6)
    secret_key = f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    key = ApiKey(key_id=key_id, tenant=tenant, scope=scope, name=name, created_at=now)
    await store.api_key_insert(key, hash_key(secret_key))
    return key, secret_key


KEY_TTL = 1.0
"""How long an API server keeps using a key it found without reading it again: a key revoked
(``tickwheel keys revoke``, another process) is refused by running servers within this time."""
KEY_ENTRIES = 1024


class KeyCache:
    """The keys one API server found lately, by hash: each request used to read its key from the
    database first, one round trip of two for a single submit. Only keys found are kept (an
    unknown token is looked up every time, and a key created a moment ago works at once), each
    for ``ttl`` seconds at most; a key's tenant and scope never change, only its revocation."""

    def __init__(
        self,
        ttl: float = KEY_TTL,
        max_entries: int = KEY_ENTRIES,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._monotonic = monotonic
        self._entries: OrderedDict[str, tuple[float, Principal]] = OrderedDict()

    async def get(self, store: Store, key_hash: str) -> Principal | None:
        now = self._monotonic()
        entry = self._entries.get(key_hash)
        if entry is not None and entry[0] > now:
            return entry[1]
        key = await store.api_key_by_hash(key_hash)
        if key is None:
            self._entries.pop(key_hash, None)
            return None
        who = Principal(tenant=key.tenant, scope=key.scope, key_id=key.key_id)
        self._entries[key_hash] = (now + self.ttl, who)
        self._entries.move_to_end(key_hash)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return who


async def authenticate(
    store: Store, authorization: str | None, cache: KeyCache | None = None
) -> Principal:
    """``cache``: the API's, for requests; a login (the dashboard's) reads the key every time."""
    if not authorization:
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("the Authorization header must be 'Bearer <key>'")
    key_hash = hash_key(token.strip())
    if cache is not None:
        who = await cache.get(store, key_hash)
    else:
        key = await store.api_key_by_hash(key_hash)
        who = None if key is None else Principal(key.tenant, key.scope, key.key_id)
    if who is None:
        raise Unauthorized("the API key is unknown or revoked")
    return who
