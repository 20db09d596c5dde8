"""Workflow Definitions in the API's wire form: the rules are ``tickwheel.app.workflows``
(register once, immutable versions, owners); this adds the JSON the routes and the in-process
workflows transport answer with (``created`` is 201 over HTTP, an unchanged one 200)."""

from __future__ import annotations

from typing import Any

from tickwheel.app.workflows import WorkflowDefinitionService
from tickwheel.client.wire import iso
from tickwheel.store.protocol import SHARED
from tickwheel.store.workflow_protocol import StoredWorkflow

Wire = dict[str, Any]


def stored_to_wire(stored: StoredWorkflow) -> Wire:
    return {
        **stored.document,
        "contentHash": stored.content_hash,
        "createdAt": iso(stored.created_at),
        "owner": stored.owner or None,
        "shared": stored.owner == SHARED,
    }


class WorkflowDefinitions(WorkflowDefinitionService):
    """The workflow definitions as ``tenant`` sees them, as wire values."""

    async def apply(self, body: bytes | str, fmt: str, shared: bool = False) -> tuple[Wire, bool]:
        """(its wire form, created)."""
        written = await self.apply_file(body, fmt, shared)
        return stored_to_wire(written.value), written.created

    async def list(self) -> list[Wire]:
        """The latest version of each workflow."""
        return [stored_to_wire(s) for s in await self.latest()]

    async def get(self, name: str, version: int | None = None) -> Wire:
        return stored_to_wire(await self.stored(name, version))
