"""The executions list shows the part of a UUIDv7 that tells rows apart: its tail. The head is
the millisecond timestamp, the same for every execution submitted in one batch."""

from __future__ import annotations

import re
from contextlib import aclosing

from tests.dashboard.conftest import Dash

BODY = {"definitionUri": "registry://jobs/greet", "inputs": {"name": "Ada"}}
LINK = re.compile(
    r'<a class="mono" href="/dashboard/executions/([0-9a-f-]{36})"([^>]*)>([^<]*)</a>'
)


async def test_each_row_shows_the_distinguishing_tail_and_links_the_full_id(dash: Dash) -> None:
    async with dash.api() as api:
        r = await api.post(
            "/v1/executions/batch",
            json={"items": [{**BODY, "idempotencyKey": f"ids-{i}"} for i in range(5)]},
        )
        assert r.status_code == 200, r.text
        ids = [item["execution"]["executionId"] for item in r.json()["items"]]
    # The fake clock stands still: every id starts with the same timestamp.
    assert len({i[:8] for i in ids}) == 1 and len({i[-12:] for i in ids}) == 5

    http, _ = await dash.signed_in()
    async with aclosing(http):
        page = (await http.get("/dashboard/executions")).text
    rows = {full: (attrs, text) for full, attrs, text in LINK.findall(page)}
    assert set(rows) == set(ids)
    shown = {text for _, text in rows.values()}
    assert len(shown) == 5, f"rows are not told apart: {shown}"
    for full, (attrs, text) in rows.items():
        assert text == "…" + full[-12:]
        assert f'title="{full}"' in attrs
