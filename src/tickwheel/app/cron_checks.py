"""Whether a cron job's target exists and accepts its inputs, checked against the registries
when a job is created or changed (``cron_create``, PATCH, every document of ``cron apply``), so
that a mistake is a 422 now rather than a FAILED row at 02:00.

With a pinned version that version must exist; with the latest, the inputs are checked against
the latest version now, and a later version that no longer accepts them makes those
occurrences FAILED, with the API's reason.

Names resolve for the job's tenant, as its submissions will: its own definition or workflow of
that name, else the shared one; another tenant's is "no such definition".
"""

from __future__ import annotations

from tickwheel.domain.cron_jobs import CronJobSpec
from tickwheel.domain.definition_refs import name_of, versioned
from tickwheel.domain.errors import FieldError, InvalidInput
from tickwheel.domain.fieldtypes import validate_values
from tickwheel.domain.workflows import workflow_from_document
from tickwheel.store.protocol import Store
from tickwheel.store.workflow_protocol import WorkflowStore


async def check_workflow(
    workflows: WorkflowStore, tenant: str, spec: CronJobSpec, path: str = ""
) -> None:
    assert spec.workflow_name is not None
    stored = await workflows.workflow_definition_get(
        tenant, spec.workflow_name, spec.workflow_version
    )
    if stored is None:
        which = f"version {spec.workflow_version} of " if spec.workflow_version else ""
        field = "workflow.version" if spec.workflow_version else "workflow.name"
        message = f"no workflow is registered as {which}{spec.workflow_name!r}"
        raise InvalidInput(message, [FieldError(path + field, "no such workflow")])
    workflow = workflow_from_document(stored.document)
    validate_values(
        workflow.inputs,
        spec.inputs,
        path + "inputs",
        context=f"workflow {workflow.name} version {workflow.version}",
    )


async def check_definition(store: Store, tenant: str, spec: CronJobSpec, path: str = "") -> None:
    assert spec.definition_uri is not None  # validate_spec checked there is one target
    name = name_of(spec.definition_uri)
    assert name is not None  # validate_spec checked the form
    stored = await store.definition_get(tenant, name, spec.definition_version)
    if stored is None:
        which = f"version {spec.definition_version} of " if spec.definition_version else ""
        field = "definitionVersion" if spec.definition_version else "definitionUri"
        message = f"no definition is registered as {which}{spec.definition_uri}"
        raise InvalidInput(message, [FieldError(path + field, "no such definition")])
    d = stored.definition
    validate_values(d.inputs, spec.inputs, path + "inputs", context=versioned(d.uri, d.version))
