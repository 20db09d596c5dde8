"""Registering Workflow Definitions: parse, check against the stored Job Definitions, store once.

Workflow Definitions are immutable like Job Definitions: the same name and version again with the
same content is a no-op (``created`` False, 200 over HTTP), with other content a Conflict naming
the fields that differ (409); a new one is stored (201). Every problem of a bad file is listed in
one InvalidInput (422) by its dotted path.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tickwheel.client.wire import iso
from tickwheel.domain.clock import Clock, SystemClock
from tickwheel.domain.definitions import Definition
from tickwheel.domain.errors import Conflict, NotFound
from tickwheel.domain.workflow_checks import check_definitions
from tickwheel.domain.workflows import (
    Workflow,
    diff_workflows,
    parse_workflow,
    workflow_content_hash,
    workflow_from_document,
    workflow_to_document,
)
from tickwheel.store.protocol import Store
from tickwheel.store.workflow_protocol import StoredWorkflow, WorkflowStore

Wire = dict[str, Any]


def stored_to_wire(stored: StoredWorkflow) -> Wire:
    return {
        **stored.document,
        "contentHash": stored.content_hash,
        "createdAt": iso(stored.created_at),
    }


class WorkflowDefinitions:
    def __init__(self, workflows: WorkflowStore, store: Store, clock: Clock | None = None) -> None:
        self.workflows = workflows
        self.store = store
        self.clock = clock or SystemClock()

    async def apply(self, body: bytes | str, fmt: str) -> tuple[Wire, bool]:
        """Registers a workflow file in ``fmt`` (yaml or json); (its wire form, created)."""
        workflow = parse_workflow(body, fmt)
        await self.check(workflow)
        stored, created = await self.store_once(workflow, self.clock.now())
        return stored_to_wire(stored), created

    async def check(self, workflow: Workflow) -> dict[str, Definition]:
        """Each task's Job Definition; InvalidInput listing every mismatch."""
        found: dict[tuple[str, int | None], Definition] = {}
        for task in workflow.tasks:
            key = (task.definition, task.definition_version)
            if key not in found:
                stored = await self.store.definition_get(*key)
                if stored is not None:
                    found[key] = stored.definition
        return check_definitions(workflow, lambda name, version: found.get((name, version)))

    async def store_once(self, workflow: Workflow, now: datetime) -> tuple[StoredWorkflow, bool]:
        candidate = StoredWorkflow(
            name=workflow.name,
            version=workflow.version,
            document=workflow_to_document(workflow),
            content_hash=workflow_content_hash(workflow),
            created_at=now,
        )
        if await self.workflows.workflow_definition_insert(candidate):
            return candidate, True
        existing = await self.workflows.workflow_definition_get(workflow.name, workflow.version)
        assert existing is not None, "insert refused but no row holds (name, version)"
        if existing.content_hash == candidate.content_hash:
            return existing, False
        fields = diff_workflows(workflow_from_document(existing.document), workflow)
        raise Conflict(
            f"workflow {workflow.name} version {workflow.version} already exists with different "
            f"content (fields that differ: {', '.join(fields)}); workflows are immutable: "
            "register the change as a new version",
            {"name": workflow.name, "version": workflow.version, "differingFields": fields},
        )

    async def list(self) -> list[Wire]:
        """The latest version of each workflow."""
        return [stored_to_wire(s) for s in await self.workflows.workflow_definition_list()]

    async def get(self, name: str, version: int | None = None) -> Wire:
        return stored_to_wire(await self.stored(name, version))

    async def stored(self, name: str, version: int | None = None) -> StoredWorkflow:
        stored = await self.workflows.workflow_definition_get(name, version)
        if stored is None:
            which = f" version {version}" if version is not None else ""
            raise NotFound(f"no workflow named {name!r}{which}")
        return stored
