"""The Job Definition rules for one tenant: register once (immutable versions), list, read.

Identical content under a name and version again is ``SAME`` (nothing written), other content a
Conflict naming the fields that differ. A definition belongs to the tenant that registered it or
to the shared registry the operator publishes; a tenant may not take a shared name, since its
submissions, pinned to that name's versions, would change owner under them."""

from __future__ import annotations

import builtins

from tickwheel.app.context import TenantContext
from tickwheel.app.outcomes import Outcome, Written
from tickwheel.domain.definition_files import parse_definition
from tickwheel.domain.definitions import Definition, content_hash, diff_definitions
from tickwheel.domain.errors import Conflict, Forbidden, NotFound
from tickwheel.store.protocol import SHARED, StoredDefinition


class DefinitionService(TenantContext):
    """Made of a ``TenantContext``: registration refuses what no worker under its
    ``run_policy`` would run (docs/worker_policy.md); its ``limits`` are submission's."""

    async def apply_file(
        self, body: bytes | str, fmt: str, shared: bool = False
    ) -> Written[StoredDefinition]:
        """A definition file in ``fmt`` (yaml or json): parsed, checked against the run
        policy, then registered as ``apply`` does."""
        return await self.apply(parse_definition(body, fmt, policy=self.run_policy), shared)

    async def apply(
        self, definition: Definition, shared: bool = False
    ) -> Written[StoredDefinition]:
        """Registers into this tenant's definitions, or with ``shared`` into the shared registry
        (the caller checked the operator scope: this service trusts whoever built it)."""
        owner = SHARED if shared else self.tenant
        if owner == SHARED and not shared:
            raise Forbidden("a tenant needs a name: '' is the shared registry's owner")
        candidate = StoredDefinition(
            definition, content_hash(definition), self.clock.now(), owner=owner
        )
        if await self.store.definition_insert(candidate):
            # A submit here right after this apply must see it (unpinned: as the latest).
            self.cache.forget(definition.name)
            return Written(Outcome.CREATED, candidate)
        existing = await self.store.definition_get(owner, definition.name, definition.version)
        if existing is None or existing.owner != owner:
            raise Conflict(
                f"{definition.name} is a shared definition; choose another name (a tenant may "
                "not register a name of the shared registry: only the operator publishes "
                "its versions)",
                {"name": definition.name, "owner": "shared"},
            )
        if existing.content_hash == candidate.content_hash:
            return Written(Outcome.SAME, existing)
        fields = diff_definitions(existing.definition, definition)
        raise Conflict(
            f"definition {definition.name} version {definition.version} already exists with "
            f"different content (fields that differ: {', '.join(fields)}); definitions are "
            "immutable: register the change as a new version",
            {"name": definition.name, "version": definition.version, "differingFields": fields},
        )

    async def list(self) -> builtins.list[StoredDefinition]:
        """This tenant's definitions and the shared ones it resolves, never another tenant's."""
        return await self.store.definition_list(self.tenant)

    async def versions(self, name: str) -> builtins.list[StoredDefinition]:
        versions = await self.store.definition_versions(self.tenant, name)
        if not versions:
            raise NotFound(f"no definition named {name!r}")
        return versions

    async def get(self, name: str, version: int) -> StoredDefinition:
        stored = await self.store.definition_get(self.tenant, name, version)
        if stored is None:
            raise NotFound(f"definition {name!r} has no version {version}")
        return stored
