"""The workflow API over HTTP: mixed into ``HttpTransport``, using its retries and error mapping.

A retried registration is safe (the same content is a 200), and so is a retried run start that
carries an idempotency key (the same key and body return the original run)."""

from __future__ import annotations

import builtins
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

# The workflow resources (and the workflow domain) load with the first workflow call.
if TYPE_CHECKING:
    from tickwheel.resources.base import Resource


Wire = dict[str, Any]
_CONTENT_TYPES = {"yaml": "application/yaml", "json": "application/json"}


class HttpWorkflowMethods:
    async def _read(
        self, model: type[Resource], method: str, path: str, **kwargs: Any
    ) -> tuple[int, Wire]:
        raise NotImplementedError  # HttpTransport's

    async def workflow_apply(
        self, body: bytes, fmt: str, shared: bool = False
    ) -> tuple[Wire, bool]:
        from tickwheel.resources.workflows import WorkflowDefinition

        headers = {"Content-Type": _CONTENT_TYPES.get(fmt, f"application/{fmt}")}
        params = {"shared": "true"} if shared else {}
        status, data = await self._read(
            WorkflowDefinition, "PUT", "/v1/workflows", content=body, headers=headers, params=params
        )
        return data, status == 201

    async def workflow_list(self) -> builtins.list[Wire]:
        from tickwheel.resources.workflows import WorkflowList

        return list((await self._read(WorkflowList, "GET", "/v1/workflows"))[1]["items"])

    async def workflow_get(self, name: str, version: int | None) -> Wire:
        from tickwheel.resources.workflows import WorkflowDefinition

        params = {"version": version} if version is not None else {}
        path = f"/v1/workflows/{quote(name, safe='')}"
        return (await self._read(WorkflowDefinition, "GET", path, params=params))[1]

    async def workflow_run_start(self, body: Wire, key: str | None) -> tuple[Wire, bool]:
        from tickwheel.resources.workflows import WorkflowRun

        headers = {"Idempotency-Key": key} if key else {}
        status, data = await self._read(
            WorkflowRun, "POST", "/v1/workflow-runs", json=body, headers=headers
        )
        return data, status == 201

    async def workflow_run_get(self, run_id: uuid.UUID) -> Wire:
        from tickwheel.resources.workflows import WorkflowRun

        return (await self._read(WorkflowRun, "GET", f"/v1/workflow-runs/{run_id}"))[1]

    async def workflow_run_cancel(self, run_id: uuid.UUID) -> Wire:
        from tickwheel.resources.workflows import WorkflowRun

        return (await self._read(WorkflowRun, "DELETE", f"/v1/workflow-runs/{run_id}"))[1]

    async def workflow_run_retry(self, run_id: uuid.UUID) -> Wire:
        from tickwheel.resources.workflows import WorkflowRun

        path = f"/v1/workflow-runs/{run_id}/retry"
        return (await self._read(WorkflowRun, "POST", path))[1]
