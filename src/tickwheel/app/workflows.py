"""Registering Workflow Definitions: parse, check against the stored Job Definitions, store once.

Workflow Definitions are immutable like Job Definitions: the same name and version again with the
same content is ``SAME`` (nothing written), with other content a Conflict naming the fields that
differ; a new one is ``CREATED``. Every problem of a bad file is listed in one InvalidInput by its
dotted path.

A workflow belongs to the tenant that registered it, or to the shared registry the operator
publishes (``shared``); names resolve as for Job Definitions (the tenant's own, else the shared),
and a tenant may not take a shared name (Conflict). A tenant's workflow is checked against the
Job Definitions that tenant resolves, a shared one against the shared registry alone.
"""

from __future__ import annotations

from datetime import datetime

from tickwheel.app.outcomes import Outcome, Written
from tickwheel.domain.clock import Clock, SystemClock
from tickwheel.domain.definitions import Definition
from tickwheel.domain.errors import Conflict, Forbidden, NotFound
from tickwheel.domain.workflow_checks import check_definitions
from tickwheel.domain.workflows import (
    Workflow,
    diff_workflows,
    parse_workflow,
    workflow_content_hash,
    workflow_from_document,
    workflow_to_document,
)
from tickwheel.store.protocol import SHARED, Store
from tickwheel.store.workflow_protocol import StoredWorkflow, WorkflowStore


class WorkflowDefinitionService:
    """The workflow definitions as ``tenant`` sees them: its own and the shared ones."""

    def __init__(
        self, workflows: WorkflowStore, store: Store, tenant: str, clock: Clock | None = None
    ) -> None:
        self.workflows = workflows
        self.store = store
        self.tenant = tenant
        self.clock = clock or SystemClock()

    async def apply_file(
        self, body: bytes | str, fmt: str, shared: bool = False
    ) -> Written[StoredWorkflow]:
        """Registers a workflow file in ``fmt`` (yaml or json) into the tenant, or with
        ``shared`` into the shared registry (the caller checked the operator scope)."""
        workflow = parse_workflow(body, fmt)
        owner = SHARED if shared else self.tenant
        if owner == SHARED and not shared:
            raise Forbidden("a tenant needs a name: '' is the shared registry's owner")
        await self.check(workflow, owner)
        return await self.store_once(workflow, self.clock.now(), owner)

    async def check(self, workflow: Workflow, owner: str) -> dict[str, Definition]:
        """Each task's Job Definition as ``owner`` resolves it (a shared workflow's tasks must
        be shared definitions); InvalidInput listing every mismatch."""
        found: dict[tuple[str, int | None], Definition] = {}
        for task in workflow.tasks:
            key = (task.definition, task.definition_version)
            if key not in found:
                stored = await self.store.definition_get(owner, *key)
                if stored is not None:
                    found[key] = stored.definition
        return check_definitions(workflow, lambda name, version: found.get((name, version)))

    async def store_once(
        self, workflow: Workflow, now: datetime, owner: str
    ) -> Written[StoredWorkflow]:
        candidate = StoredWorkflow(
            name=workflow.name,
            version=workflow.version,
            document=workflow_to_document(workflow),
            content_hash=workflow_content_hash(workflow),
            created_at=now,
            owner=owner,
        )
        if await self.workflows.workflow_definition_insert(candidate):
            return Written(Outcome.CREATED, candidate)
        existing = await self.workflows.workflow_definition_get(
            owner, workflow.name, workflow.version
        )
        if existing is None or existing.owner != owner:
            raise Conflict(
                f"{workflow.name} is a shared workflow; choose another name (a tenant may not "
                "register a name of the shared registry: only the operator publishes its "
                "versions)",
                {"name": workflow.name, "owner": "shared"},
            )
        if existing.content_hash == candidate.content_hash:
            return Written(Outcome.SAME, existing)
        fields = diff_workflows(workflow_from_document(existing.document), workflow)
        raise Conflict(
            f"workflow {workflow.name} version {workflow.version} already exists with different "
            f"content (fields that differ: {', '.join(fields)}); workflows are immutable: "
            "register the change as a new version",
            {"name": workflow.name, "version": workflow.version, "differingFields": fields},
        )

    async def latest(self) -> list[StoredWorkflow]:
        """The latest version of each workflow."""
        return await self.workflows.workflow_definition_list(self.tenant)

    async def stored(self, name: str, version: int | None = None) -> StoredWorkflow:
        stored = await self.workflows.workflow_definition_get(self.tenant, name, version)
        if stored is None:
            which = f" version {version}" if version is not None else ""
            raise NotFound(f"no workflow named {name!r}{which}")
        return stored
