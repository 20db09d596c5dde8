"""The dashboard's paged lists refuse a cursor they did not hand out (issue 12), as the API does,
rather than reading stray bytes as a position."""

from __future__ import annotations

from contextlib import aclosing

import pytest

from tests.dashboard.conftest import Dash


@pytest.mark.parametrize("page", ["/dashboard/executions", "/dashboard/workflows/runs"])
@pytest.mark.parametrize("cursor", ["z" * 22, "AAAA", "garbage!", "A" * 21 + "=="])
async def test_a_cursor_the_dashboard_did_not_make_is_400(
    dash: Dash, page: str, cursor: str
) -> None:
    http, _ = await dash.signed_in()
    async with aclosing(http):
        r = await http.get(page, params={"cursor": cursor})
        assert r.status_code == 400, r.text
        assert "cursor" in r.text
