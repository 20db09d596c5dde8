"""The execution page of a RUNNING execution: its progress and checkpoint, and the cancel
button, which asks its worker to stop it (once)."""

from __future__ import annotations

import uuid
from contextlib import aclosing
from datetime import timedelta

from tests.dashboard.conftest import Dash
from tests.dashboard.test_routes import submit
from tests.factories import T0


async def test_a_running_execution_shows_progress_and_can_be_asked_to_stop(dash: Dash) -> None:
    e = await submit(dash)
    [claimed] = await dash.store.execution_claim_ready("w1", 1, timedelta(minutes=5))
    assert claimed.fencing_token is not None
    progress = {"fraction": 0.42, "message": "copied 4,200 rows", "at": T0.isoformat()}
    await dash.store.execution_beat(
        uuid.UUID(e["executionId"]),
        claimed.fencing_token,
        timedelta(minutes=5),
        progress=progress,
        checkpoint={"row": 4200},
    )
    http, csrf = await dash.signed_in()
    async with aclosing(http):
        here = f"/dashboard/executions/{e['executionId']}"
        page = await http.get(here)
        assert "RUNNING" in page.text and f"{here}/cancel" in page.text
        assert "42% copied 4,200 rows" in page.text and 'id="checkpoint"' in page.text
        r = await http.post(f"{here}/cancel", data={"csrf": csrf})
        assert r.status_code == 303 and "notice=Cancel%20requested" in r.headers["location"]
        page = await http.get(here)
        assert 'id="cancel-requested"' in page.text and f"{here}/cancel" not in page.text
        assert "cancel_requested" in page.text  # the history names it


async def test_the_execution_page_shows_its_concurrency_limit(dash: Dash) -> None:
    async with dash.api() as api:
        body = {
            "definitionUri": "registry://jobs/greet",
            "inputs": {"name": "Ada <b>"},
            "concurrency": {"key": "${{ inputs.name }}", "limit": 2, "order": "none"},
        }
        r = await api.post("/v1/executions", json=body)
        assert r.status_code == 201, r.text
        e = r.json()
    http, _ = await dash.signed_in()
    async with aclosing(http):
        page = await http.get(f"/dashboard/executions/{e['executionId']}")
        assert 'id="concurrency"' in page.text
        # The key is the tenant's text: escaped like any other.
        assert "at most 2 of key <code>Ada &lt;b&gt;</code> at once, order none" in page.text
