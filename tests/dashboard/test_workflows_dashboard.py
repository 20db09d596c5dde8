"""The dashboard's Workflows section on both backends: definitions, the run list with its
filters and keyset pages, the run page's graph (layers, states, links), its live feed, and the
cancel and retry buttons with and without the session's CSRF token."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import uuid
from collections.abc import Iterator
from contextlib import aclosing
from typing import Any

import pytest

from tests.dashboard.conftest import Dash
from tests.workflows import jobs
from tests.workflows.helpers import DIAMOND, WorkflowRig, chain
from tickwheel.dashboard import dag, run_feed
from tickwheel.dashboard import workflows as pages
from tickwheel.domain.models import Scope

DIAMOND_TASKS = {
    "extract": [],
    "clean": ["extract"],
    "stats": ["extract"],
    "publish": ["clean", "stats"],
}
NODE = re.compile(
    r'<a class="node st-([a-z_]+)" data-task="([^"]+)" data-state="([A-Z_]+)" '
    r'data-layer="(\d+)"( href="[^"]+")?'
)


@pytest.fixture(autouse=True)
def no_failures() -> Iterator[None]:
    jobs.FAIL.clear()
    yield
    jobs.FAIL.clear()


@pytest.fixture
async def rig(dash: Dash) -> WorkflowRig:
    rig = WorkflowRig(dash.store)
    await rig.register_jobs()
    await rig.apply(DIAMOND)
    return rig


def nodes(html: str) -> dict[str, tuple[str, int, str | None]]:
    """Each drawn task: (state, layer, link or None)."""
    found = {}
    for cls, name, state, layer, href in NODE.findall(html):
        assert cls == state.lower()
        found[name] = (state, int(layer), href.strip()[6:-1] if href else None)
    return found


# -- the layout -------------------------------------------------------------------------------


def test_a_diamond_is_laid_out_in_three_layers() -> None:
    assert dag.layers(DIAMOND_TASKS) == [["extract"], ["clean", "stats"], ["publish"]]
    graph = dag.layout(DIAMOND_TASKS)
    at = {n.name: n for n in graph.nodes}
    assert at["extract"].x < at["clean"].x == at["stats"].x < at["publish"].x
    assert at["clean"].y < at["stats"].y
    # The single nodes are centred on the two-node layer.
    assert at["extract"].y == at["publish"].y == (at["clean"].y + at["stats"].y) // 2
    assert {(e.source, e.target) for e in graph.edges} == {
        ("extract", "clean"),
        ("extract", "stats"),
        ("clean", "publish"),
        ("stats", "publish"),
    }
    assert graph.width == 2 * dag.PAD + 3 * dag.NODE_W + 2 * dag.COL_GAP


def test_a_layer_follows_the_rows_of_its_upstream_tasks() -> None:
    # Document order would cross the edges (x2 under b, x1 under a); the sweep uncrosses them.
    tasks = {"a": [], "b": [], "x2": ["b"], "x1": ["a"], "end": ["x1", "x2", "a"]}
    assert dag.layers(tasks) == [["a", "b"], ["x1", "x2"], ["end"]]
    # The layer is the longest path: ``end`` depends on ``a`` directly and through ``x1``.
    assert dag.depths(tasks)["end"] == 2


# -- definitions and the run list -------------------------------------------------------------


async def test_the_workflows_page_lists_each_workflow_with_its_versions(
    dash: Dash, rig: WorkflowRig
) -> None:
    await rig.apply(DIAMOND.replace("version: 1", "version: 2"))
    await rig.apply(chain({"name": "a"}, {"name": "b", "dependsOn": ["a"]}))
    http, _ = await dash.signed_in()
    async with aclosing(http):
        page = await http.get("/dashboard/workflows")
    assert page.status_code == 200
    row = re.search(r'<tr data-workflow="nightly-report">(.*?)</tr>', page.text, re.S)
    assert row, page.text
    cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row.group(1), re.S)
    assert cells[:4] == ["nightly-report", "v2", "2 (v1\u2013v2)", "4"]
    chain_row = re.search(r'<tr data-workflow="chain">(.*?)</tr>', page.text, re.S)
    assert chain_row and "<td>1</td>" in chain_row.group(1) and "<td>2</td>" in chain_row.group(1)
    assert 'href="/dashboard/workflows" aria-current="page">Workflows' in page.text


async def test_the_run_list_filters_by_workflow_and_status_and_pages_newest_first(
    dash: Dash, rig: WorkflowRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    await rig.apply(chain({"name": "a"}))
    diamonds = [await rig.start("nightly-report", day="2026-03-01") for _ in range(3)]
    other = await rig.start("chain")
    await rig.settle()  # every run SUCCEEDED
    running = await rig.start("nightly-report", day="2026-03-02")
    monkeypatch.setattr(pages, "PAGE", 2)
    http, _ = await dash.signed_in()
    async with aclosing(http):
        first = await http.get("/dashboard/workflows/runs?workflow=nightly-report")
        listed = re.findall(r'<tr data-run="([^"]+)">', first.text)
        assert listed == [str(running), str(diamonds[2])]
        older = re.search(r'href="(\?[^"]+)" rel="next"', first.text)
        assert older
        second = await http.get("/dashboard/workflows/runs" + older.group(1).replace("&amp;", "&"))
        assert re.findall(r'<tr data-run="([^"]+)">', second.text) == [
            str(diamonds[1]),
            str(diamonds[0]),
        ]
        assert 'rel="next"' not in second.text and ">Newest</a>" in second.text
        done = await http.get("/dashboard/workflows/runs?status=RUNNING")
        assert re.findall(r'<tr data-run="([^"]+)">', done.text) == [str(running)]
        assert "0/4 done" in done.text
        everything = await http.get("/dashboard/workflows/runs")
        assert str(other) in everything.text
        assert "4/4 done" in (await http.get("/dashboard/workflows/runs?status=SUCCEEDED")).text
        bad = await http.get("/dashboard/workflows/runs?status=DONE")
        assert bad.status_code == 400 and "unknown run status" in bad.text
        long = await http.get("/dashboard/workflows/runs?workflow=" + "w" * 129)
        assert long.status_code == 400 and "at most 128" in long.text
        cursor = await http.get("/dashboard/workflows/runs?cursor=%%%")
        assert cursor.status_code == 400 and "cursor" in cursor.text


async def test_another_tenants_runs_are_not_listed_nor_shown(dash: Dash, rig: WorkflowRig) -> None:
    run_id = await rig.start("nightly-report", day="2026-03-01")
    http, _ = await dash.signed_in(await dash.key(Scope.READ, tenant="globex"))
    async with aclosing(http):
        listed = await http.get("/dashboard/workflows/runs")
        assert str(run_id) not in listed.text and "No workflow runs match." in listed.text
        page = await http.get(f"/dashboard/workflows/runs/{run_id}")
        assert page.status_code == 404
        events = await http.get(f"/dashboard/workflows/runs/{run_id}/events")
        assert events.status_code == 404
        assert (await http.get("/dashboard/workflows/runs/not-a-uuid")).status_code == 404


# -- the run page -----------------------------------------------------------------------------


async def test_the_run_page_draws_the_diamond_with_each_tasks_state(
    dash: Dash, rig: WorkflowRig
) -> None:
    run_id = await rig.start("nightly-report", day="2026-03-01")
    http, _ = await dash.signed_in()
    async with aclosing(http):
        page = await http.get(f"/dashboard/workflows/runs/{run_id}")
        assert page.status_code == 200, page.text
        drawn = nodes(page.text)
        # The root's task run is SUBMITTED: the node shows its execution's state (READY).
        extract = (await rig.tasks(run_id))["extract"]
        assert drawn == {
            "extract": ("READY", 0, f"/dashboard/executions/{extract['executionId']}"),
            "clean": ("PENDING", 1, None),
            "stats": ("PENDING", 1, None),
            "publish": ("PENDING", 2, None),
        }
        assert page.text.count('class="edge"') == 4
        assert "0 of 4 tasks done" in page.text
        # The text alternative: one row per task, in the workflow's order.
        assert re.findall(r'<tr data-task="([^"]+)">', page.text) == list(DIAMOND_TASKS)
        assert f'data-events="/dashboard/workflows/runs/{run_id}/events"' in page.text
        assert 'id="cancel-form"' in page.text and 'id="retry-form"' in page.text
        assert re.search(r'id="retry-form"[^>]* hidden>', page.text)
        await rig.settle()
        done = await http.get(f"/dashboard/workflows/runs/{run_id}")
    finished = nodes(done.text)
    assert {state for state, _, _ in finished.values()} == {"SUCCEEDED"}
    tasks = await rig.tasks(run_id)
    assert {n: link for n, (_, _, link) in finished.items()} == {
        n: f"/dashboard/executions/{t['executionId']}" for n, t in tasks.items()
    }
    assert "4 of 4 tasks done" in done.text
    assert re.search(r'id="cancel-form"[^>]* hidden>', done.text)


async def test_a_read_only_key_sees_the_run_without_buttons(dash: Dash, rig: WorkflowRig) -> None:
    run_id = await rig.start("nightly-report", day="2026-03-01")
    http, csrf = await dash.signed_in(await dash.key(Scope.READ))
    async with aclosing(http):
        page = await http.get(f"/dashboard/workflows/runs/{run_id}")
        assert page.status_code == 200 and "cancel-form" not in page.text
        refused = await http.post(f"/dashboard/workflows/runs/{run_id}/cancel", data={"csrf": csrf})
    assert refused.status_code == 403
    assert (await rig.get(run_id))["status"] == "RUNNING"


async def test_the_live_feed_reads_once_for_every_page_and_sends_only_changes(
    dash: Dash, rig: WorkflowRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_feed, "TICK", 0.05)
    monkeypatch.setattr(run_feed, "KEEP_ALIVE", 0.2)
    run_id = await rig.start("nightly-report", day="2026-03-01")
    hub = run_feed.RunHub(dash.app.state.dashboard_workflow_views)  # type: ignore[attr-defined]
    feed = hub.feed("acme", run_id)
    assert feed is not None and hub.feed("acme", run_id) is feed
    snapshot = await feed.read()
    assert snapshot is not None
    assert {t["name"]: t["state"] for t in snapshot["tasks"]} == {
        "clean": "PENDING",
        "extract": "READY",
        "publish": "PENDING",
        "stats": "PENDING",
    }
    assert snapshot["run"] == {
        "status": "RUNNING",
        "retryCount": 0,
        "finishedAt": None,
        "canCancel": True,
        "canRetry": False,
    }
    # Another tenant's feed of the same id sees nothing (the route answers 404 before it).
    other = hub.feed("globex", run_id)
    assert other is not None and await other.read() is None

    disconnected = False

    async def gone() -> bool:
        return disconnected

    stream = hub.stream(feed, gone)
    assert await anext(stream) == "retry: 1000\n\n"
    first = await anext(stream)
    assert first.startswith("event: run\ndata: {") and '"state":"READY"' in first
    # A second page shares the reads: it gets the latest snapshot at once, and then nothing
    # while reads find no change.
    page = feed.subscribe()
    assert await page.get(timeout=0.01) == feed.last
    async with asyncio.timeout(10):
        while feed.queries < 4:  # noqa: ASYNC110 - counts the feed loop's own reads
            await asyncio.sleep(0.01)
    assert await page.get(timeout=0.01) is None
    await rig.settle()
    # The changes arrive from the feed's own loop, which may catch the run midway: every event
    # differs from the one before, and the last shows the run finished.
    seen: list[dict[str, Any]] = [json.loads(first.split("data: ", 1)[1])]
    async with asyncio.timeout(10):
        while seen[-1]["run"]["status"] != "SUCCEEDED":
            chunk = await anext(stream)
            if not chunk.startswith(":"):
                seen.append(json.loads(chunk.split("data: ", 1)[1]))
    assert all(a != b for a, b in itertools.pairwise(seen))
    assert seen[-1]["done"] == 4
    shared = await page.get(timeout=1.0)
    assert shared is not None and shared["run"]["status"] == "SUCCEEDED"
    feed.unsubscribe(page)
    assert ("acme", run_id) in hub.feeds  # the stream still listens
    disconnected = True
    with pytest.raises(StopAsyncIteration):
        while True:
            await anext(stream)
    assert ("acme", run_id) not in hub.feeds  # the last page left: nobody reads any more
    assert feed.task is not None
    await asyncio.wait_for(feed.task, 5)  # the loop ends by itself


async def test_too_many_watched_runs_answer_503(
    dash: Dash, rig: WorkflowRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = await rig.start("nightly-report", day="2026-03-01")
    monkeypatch.setattr(run_feed, "MAX_FEEDS", 0)
    http, _ = await dash.signed_in()
    async with aclosing(http):
        busy = await http.get(f"/dashboard/workflows/runs/{run_id}/events")
    assert busy.status_code == 503 and "too many runs" in busy.json()["error"]["message"]


async def test_the_event_stream_needs_a_session(dash: Dash, rig: WorkflowRig) -> None:
    run_id = await rig.start("nightly-report", day="2026-03-01")
    async with dash.client() as http:
        r = await http.get(f"/dashboard/workflows/runs/{run_id}/events")
    assert r.status_code == 401


# -- cancel and retry -------------------------------------------------------------------------


async def test_cancel_needs_the_csrf_token_and_goes_through_the_run_service(
    dash: Dash, rig: WorkflowRig
) -> None:
    run_id = await rig.start("nightly-report", day="2026-03-01")
    url = f"/dashboard/workflows/runs/{run_id}"
    http, csrf = await dash.signed_in()
    async with aclosing(http):
        forged = await http.post(url + "/cancel", data={"csrf": "forged"})
        assert forged.status_code == 403 and "security token" in forged.text
        missing = await http.post(url + "/cancel")
        assert missing.status_code == 403
        assert (await rig.get(run_id))["status"] == "RUNNING"
        done = await http.post(url + "/cancel", data={"csrf": csrf})
        assert done.status_code == 303
        assert done.headers["location"].startswith(url + "?notice=Cancelled")
        run = await rig.get(run_id)
        assert run["status"] == "CANCELLED"
        assert {t["name"]: t["status"] for t in run["tasks"]} == dict.fromkeys(
            DIAMOND_TASKS, "CANCELLED"
        )
        again = await http.post(url + "/cancel", data={"csrf": csrf})
        assert again.status_code == 303 and "not+RUNNING" in again.headers["location"].replace(
            "%20", "+"
        )
        page = await http.get(url)
        assert nodes(page.text)["extract"][0] == "CANCELLED"
        assert re.search(r'id="cancel-form"[^>]* hidden>', page.text)
        assert not re.search(r'id="retry-form"[^>]* hidden>', page.text)
        unknown = await http.post(
            f"/dashboard/workflows/runs/{uuid.uuid4()}/cancel", data={"csrf": csrf}
        )
        assert unknown.status_code == 404


async def test_retry_reruns_the_failed_and_skipped_tasks(dash: Dash, rig: WorkflowRig) -> None:
    await rig.apply(
        chain({"name": "a"}, {"name": "b", "dependsOn": ["a"]}, {"name": "c", "dependsOn": ["b"]})
    )
    jobs.FAIL.add("b")
    run_id = await rig.start("chain")
    await rig.settle()
    url = f"/dashboard/workflows/runs/{run_id}"
    http, csrf = await dash.signed_in()
    async with aclosing(http):
        failed = await http.get(url)
        assert {n: s for n, (s, _, _) in nodes(failed.text).items()} == {
            "a": "SUCCEEDED",
            "b": "FAILED",
            "c": "SKIPPED",
        }
        assert re.search(r'id="cancel-form"[^>]* hidden>', failed.text)
        forged = await http.post(url + "/retry", data={"csrf": csrf + "x"})
        assert forged.status_code == 403
        assert (await rig.get(run_id))["status"] == "FAILED"
        jobs.FAIL.clear()
        retried = await http.post(url + "/retry", data={"csrf": csrf})
        assert retried.status_code == 303
        assert "Retried%20%28retry%201%29" in retried.headers["location"]
        refused = await http.post(url + "/retry", data={"csrf": csrf})
        assert refused.status_code == 303 and "only%20FAILED" in refused.headers["location"]
        await rig.settle()
        page = await http.get(url)
    assert {s for s, _, _ in nodes(page.text).values()} == {"SUCCEEDED"}
    run = await rig.get(run_id)
    assert run["status"] == "SUCCEEDED" and run["retryCount"] == 1
