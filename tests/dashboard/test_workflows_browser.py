"""The run page in a real browser (Debian's Chromium, Playwright) against a real ``tickwheel
server``: a diamond run's graph changes state live, without a reload, as the server's own
worker and orchestrator move the run forward.

Each task blocks on a gate file the test creates, so the test decides when the run moves on
and can watch every step happen on the open page."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.acceptance.conftest import EXAMPLES, ServerProcess, clean_env, start_server
from tests.dashboard.test_browser import ARGS, CHROMIUM, sync_api

GATED_JOB = """
import time
from pathlib import Path

GATES = Path(__file__).with_name("gates")


def step(name: str) -> dict[str, str]:
    # Held until the test opens this task's gate (or 30 s pass: then the task fails).
    deadline = time.monotonic() + 30
    while not (GATES / name).exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"gate {name} never opened")
        time.sleep(0.05)
    return {"done": name}
"""
GATED_DEFINITION = """
name: gated
version: 1
inputs:
  name: string
outputs:
  done: string
execution:
  type: python
  entrypoint: gated_jobs:step
timeout: 60
retry:
  maxAttempts: 1
"""
DIAMOND = """
name: gated-diamond
version: 1
description: Four gated steps, A before B and C, both before D.
tasks:
  - {name: a, definition: registry://jobs/gated, inputs: {name: a}}
  - {name: b, definition: registry://jobs/gated, inputs: {name: b}, dependsOn: [a]}
  - {name: c, definition: registry://jobs/gated, inputs: {name: c}, dependsOn: [a]}
  - {name: d, definition: registry://jobs/gated, inputs: {name: d}, dependsOn: [b, c]}
"""

HELD = """
name: held
version: 1
tasks:
  - {name: first, definition: registry://jobs/gated, inputs: {name: e}}
  - {name: second, definition: registry://jobs/gated, inputs: {name: f}, dependsOn: [first]}
"""


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    root = tmp_path_factory.mktemp("wf-dash")
    definitions = root / "definitions"
    shutil.copytree(EXAMPLES, definitions)
    (definitions / "gated.yaml").write_text(GATED_DEFINITION)
    code = root / "code"
    code.mkdir()
    (code / "gated_jobs.py").write_text(GATED_JOB)
    gates = code / "gates"
    gates.mkdir()
    env = clean_env(PYTHONPATH=str(code))
    # The job module is on PYTHONPATH, outside the server's working directory: allow it (and
    # the examples) explicitly, as an operator would (docs/worker_policy.md).
    allow = ["--python-module", "gated_jobs", "--python-module", "tickwheel.examples"]
    proc = start_server(
        root / "run", "--definitions", str(definitions), *allow, definitions=False, env=env
    )
    try:
        yield proc, gates
    finally:
        for name in "abcdef":  # let held jobs end so the server stops promptly
            (gates / name).touch()
        proc.stop()


def api(server: ServerProcess, method: str, path: str, **kw: Any) -> Any:
    r = httpx.request(method, server.url + path, headers=server.headers(), timeout=10, **kw)
    assert r.status_code < 300, r.text
    return r.json()


def wait_for(page: Any, expression: str) -> None:
    # A function, not a bare expression: the page's CSP forbids eval of a string.
    page.wait_for_function(f"() => {expression}", timeout=20_000)


def node_state(page: Any, task: str) -> str:
    state: str = page.get_attribute(f"#run-graph a.node[data-task={task}]", "data-state")
    return state


def test_a_run_graph_changes_state_live(gated: tuple[ServerProcess, Path], tmp_path: Path) -> None:
    server, gates = gated
    headers = {**server.headers(), "Content-Type": "application/yaml"}
    for text in (DIAMOND, HELD):
        r = httpx.put(server.url + "/v1/workflows", content=text, headers=headers, timeout=10)
        assert r.status_code == 201, r.text
    run = api(server, "POST", "/v1/workflow-runs", json={"workflow": "gated-diamond"})
    run_id = run["workflowRunId"]
    problems: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.set_default_timeout(15_000)
            page.goto(server.url + "/dashboard/signin")
            page.fill("#api_key", server.admin_key or "")
            page.keyboard.press("Enter")
            page.wait_for_url(server.url + "/")
            # From the nav to the definitions, to the runs, to the run.
            page.click("nav >> text=Workflows")
            row = page.locator("tr[data-workflow=gated-diamond]").inner_text()
            assert "v1" in row and "4" in row
            page.screenshot(path=str(tmp_path / "workflows.png"), full_page=True)
            page.click("a[aria-label='Runs of gated-diamond']")
            # count() does not wait: the click only starts the navigation.
            page.wait_for_url(server.url + "/dashboard/workflows/runs?workflow=gated-diamond")
            page.wait_for_selector("#runs tr[data-run]")
            assert page.locator("#runs tr[data-run]").count() == 1
            page.screenshot(path=str(tmp_path / "workflow-runs.png"), full_page=True)
            page.click(f"a[aria-label='Run {run_id}']")
            page.wait_for_selector("#run-live:has-text('live')")
            _watch_the_run(page, gates, run_id, tmp_path)
            _keyboard_reaches_a_task(page, server, tmp_path)
            _cancel_then_retry(page, server, gates, tmp_path)
            page.set_viewport_size({"width": 390, "height": 844})
            page.goto(f"{server.url}/dashboard/workflows/runs/{run_id}")
            page.wait_for_selector("#run-live:has-text('live')")
            page.screenshot(path=str(tmp_path / "phone-workflow-run.png"), full_page=True)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, f"the run page scrolls sideways on a phone ({width}px)"
            # The graph scrolls inside its own region instead.
            scroller = page.locator(".graph-scroll")
            assert scroller.evaluate("e => e.scrollWidth > e.clientWidth")
            page.goto(server.url + "/dashboard/workflows/runs")
            page.screenshot(path=str(tmp_path / "phone-workflow-runs.png"), full_page=True)
        finally:
            browser.close()
    assert problems == [], problems


def _watch_the_run(page: Any, gates: Path, run_id: str, tmp_path: Path) -> None:
    # The page is never reloaded: a marker on the window survives only in the same document.
    page.evaluate("window.__sameDocument = true")
    wait_for(page, "document.querySelector('a.node[data-task=a]').dataset.state === 'RUNNING'")
    assert node_state(page, "b") == node_state(page, "d") == "PENDING"
    assert page.locator("#run-status").inner_text() == "RUNNING"
    page.screenshot(path=str(tmp_path / "workflow-run-started.png"), full_page=True)
    (gates / "a").touch()
    wait_for(page, "document.querySelector('a.node[data-task=a]').dataset.state === 'SUCCEEDED'")
    wait_for(
        page,
        "['b', 'c'].every(t => document.querySelector(`a.node[data-task=${t}]`)"
        ".dataset.state === 'RUNNING')",
    )
    assert node_state(page, "d") == "PENDING"
    # The node links to its execution once it has one; the table says the same as the graph.
    assert page.get_attribute("a.node[data-task=b]", "href", timeout=1000) is not None
    assert page.locator("#run-tasks tr[data-task=b] [data-col=state]").inner_text() == "RUNNING"
    assert "1 of 4 tasks done" in page.locator("#run-progress").inner_text()
    page.screenshot(path=str(tmp_path / "workflow-run-midway.png"), full_page=True)
    for name in "bcd":
        (gates / name).touch()
    wait_for(page, "document.getElementById('run-status').textContent === 'SUCCEEDED'")
    assert [node_state(page, t) for t in "abcd"] == ["SUCCEEDED"] * 4
    assert page.evaluate("window.__sameDocument") is True
    assert page.locator("#cancel-form").is_hidden() and page.locator("#retry-form").is_hidden()
    page.screenshot(path=str(tmp_path / "workflow-run-done.png"), full_page=True)


def _keyboard_reaches_a_task(page: Any, server: ServerProcess, tmp_path: Path) -> None:
    """Tab from the graph's scroll region lands on the first task; Enter opens its execution."""
    page.focus(".graph-scroll")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.task") == "a"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.task") == "b"
    page.locator(".graph-card").screenshot(path=str(tmp_path / "workflow-run-focus.png"))
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{server.url}/dashboard/executions/**")
    page.wait_for_selector("#attempts .attempt")
    page.go_back()
    page.wait_for_selector("#run-graph")


def _cancel_then_retry(page: Any, server: ServerProcess, gates: Path, tmp_path: Path) -> None:
    """The buttons: cancel while ``first`` runs (``second`` is cancelled, ``first`` runs on and
    its outcome still shows), then retry, which reruns the cancelled task."""
    run_id = api(server, "POST", "/v1/workflow-runs", json={"workflow": "held"})["workflowRunId"]
    page.goto(f"{server.url}/dashboard/workflows/runs/{run_id}")
    wait_for(page, "document.querySelector('a.node[data-task=first]').dataset.state === 'RUNNING'")
    assert page.locator("#retry-form").is_hidden()
    page.click("button:has-text('Cancel run')")
    assert "Cancelled: the run is CANCELLED" in page.locator(".notice").inner_text()
    assert node_state(page, "second") == "CANCELLED"
    assert page.locator("#cancel-form").is_hidden() and page.locator("#retry-form").is_visible()
    (gates / "e").touch()
    # The execution that was already running ends on its own; its outcome arrives live.
    wait_for(
        page, "document.querySelector('a.node[data-task=first]').dataset.state === 'SUCCEEDED'"
    )
    page.screenshot(path=str(tmp_path / "workflow-run-cancelled.png"), full_page=True)
    (gates / "f").touch()
    page.click("button:has-text('Retry (keeps succeeded tasks)')")
    assert "Retried (retry 1)" in page.locator(".notice").inner_text()
    wait_for(page, "document.getElementById('run-status').textContent === 'SUCCEEDED'")
    assert node_state(page, "second") == "SUCCEEDED"
    assert api(server, "GET", f"/v1/workflow-runs/{run_id}")["retryCount"] == 1
