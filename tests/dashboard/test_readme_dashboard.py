"""What the README's tour says about the dashboard holds: it is at ``/``, signing in takes an API
key, a session sees its key's tenant only, and a ``read`` key gets no buttons."""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path

from tests.dashboard.conftest import Dash
from tickwheel.domain.models import Scope

README = Path(__file__).resolve().parents[2] / "README.md"
LATER = {
    "definitionUri": "registry://jobs/greet",
    "inputs": {"name": "Ada"},
    "executeAt": "2026-03-01T13:00:00Z",
}


def test_the_readme_tells_how_to_open_and_sign_in_to_the_dashboard() -> None:
    tour = README.read_text().split("## Recurring jobs", 1)[0]
    step = tour.split("Open the dashboard", 1)[1].split("**8.", 1)[0]
    for fact in ("http://127.0.0.1:8000/", "API key", "tickwheel.admin-key", "`read` key",
                 "tenant", "Sign out"):  # fmt: skip
        assert fact in step, fact


async def test_what_the_readme_says_each_scope_sees(dash: Dash) -> None:
    async with dash.api() as api:
        r = await api.post("/v1/executions", json=LATER)
        assert r.status_code == 201, r.text
        mine = r.json()["executionId"]
    anonymous = dash.client()
    async with aclosing(anonymous):
        r = await anonymous.get("/")
        assert r.status_code == 303 and r.headers["location"].startswith("/dashboard/signin")

    reader, _ = await dash.signed_in(await dash.key(Scope.READ))
    async with aclosing(reader):
        page = (await reader.get(f"/dashboard/executions/{mine}")).text
        assert "SCHEDULED" in page and ">Cancel</button>" not in page
    submitter, _ = await dash.signed_in(await dash.key(Scope.SUBMIT))
    async with aclosing(submitter):
        page = (await submitter.get(f"/dashboard/executions/{mine}")).text
        assert ">Cancel</button>" in page
    stranger, _ = await dash.signed_in(await dash.key(Scope.ADMIN, tenant="globex"))
    async with aclosing(stranger):
        assert (await stranger.get(f"/dashboard/executions/{mine}")).status_code == 404
        assert mine not in (await stranger.get("/dashboard/executions")).text
