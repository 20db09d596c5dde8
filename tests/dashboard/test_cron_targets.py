"""The dashboard's cron list shows what each job starts: a definition or a workflow (issue 7's
cron jobs that target a workflow), on both backends."""

from __future__ import annotations

from contextlib import aclosing

from tests.cron.helpers import GREETING
from tests.dashboard.conftest import Dash


async def test_the_cron_list_shows_each_jobs_target(dash: Dash) -> None:
    async with dash.api() as api:
        r = await api.put(
            "/v1/workflows", content=GREETING, headers={"Content-Type": "application/yaml"}
        )
        assert r.status_code == 201, r.text
        for job in (
            {"name": "by-definition", "definitionUri": "greet", "inputs": {"name": "A"}},
            {"name": "by-workflow", "workflow": {"name": "greeting", "version": 1},
             "inputs": {"who": "A"}},
        ):  # fmt: skip
            r = await api.post("/v1/cron-jobs", json={**job, "expression": "0 2 * * *"})
            assert r.status_code == 201, r.text
    http, _ = await dash.signed_in()
    async with aclosing(http):
        page = (await http.get("/dashboard/cron-jobs")).text
    assert '<th scope="col">Target</th>' in page
    assert "definition greet (latest)" in page
    assert 'workflow <a href="/dashboard/workflows">greeting</a> (1)' in page
