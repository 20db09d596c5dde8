"""The dashboard shows a tenant its own and the shared definitions and workflows, never another
tenant's (issue 12): the catalog, a definition's page, the executions filter, the workflow pages."""

from __future__ import annotations

from contextlib import aclosing

from tests.dashboard.conftest import Dash
from tests.factories import definition_doc
from tickwheel.domain.models import Scope

WORKFLOW = """
name: globex-private-flow
version: 1
tasks:
  - {name: one, definition: registry://jobs/globex-private, inputs: {name: x}}
"""


async def test_another_tenants_definitions_and_workflows_are_invisible(dash: Dash) -> None:
    globex = await dash.key(Scope.ADMIN, tenant="globex")
    async with dash.api(globex) as api:
        r = await api.put("/v1/definitions", json=definition_doc("globex-private"))
        assert r.status_code == 201, r.text
        r = await api.put(
            "/v1/workflows", content=WORKFLOW, headers={"Content-Type": "application/yaml"}
        )
        assert r.status_code == 201, r.text
    http, _ = await dash.signed_in()  # acme's admin
    async with aclosing(http):
        catalog = await http.get("/dashboard/definitions")
        assert "greet" in catalog.text and "shared" in catalog.text
        assert "globex-private" not in catalog.text
        assert (await http.get("/dashboard/definitions/globex-private")).status_code == 404
        assert "globex-private" not in (await http.get("/dashboard/executions")).text
        assert "globex-private" not in (await http.get("/dashboard/workflows")).text
        assert "globex-private" not in (await http.get("/dashboard/workflows/runs")).text
    theirs, _ = await dash.signed_in(globex)
    async with aclosing(theirs):
        assert "globex-private-flow" in (await theirs.get("/dashboard/workflows")).text
        assert "globex-private" in (await theirs.get("/dashboard/definitions")).text
