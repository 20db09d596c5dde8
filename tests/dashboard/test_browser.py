"""Browser tests: Debian's Chromium, driven by Playwright, against a real ``tickwheel server``.

Never ``playwright install``: the browser is the system's ``/usr/bin/chromium`` (``.ci/run``
installs it when missing). Without it the tests skip, except under ``CI=true`` where a missing
browser is a failure, so CI can never pass by silently not running them."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.acceptance.conftest import EXAMPLES, ServerProcess, clean_env, start_server

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DOOMED_JOB = """
from tickwheel import PermanentError


def explode(name: str) -> dict[str, str]:
    raise PermanentError(f"cannot process {name}: the input file is corrupt")
"""
DOOMED_DEFINITION = """
name: doomed
version: 1
inputs:
  name: string
outputs:
  greeting: string
execution:
  type: python
  entrypoint: doomed_jobs:explode
retry:
  maxAttempts: 3
"""

if not Path(CHROMIUM).exists():
    if os.environ.get("CI") == "true":
        pytest.fail(f"{CHROMIUM} is missing; .ci/run installs it (apt-get install chromium)")
    pytest.skip(
        f"{CHROMIUM} is not installed (apt-get install chromium); browser tests skipped",
        allow_module_level=True,
    )

sync_api = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """An all-in-one server with the examples and a definition that always fails permanently."""
    root = tmp_path_factory.mktemp("dash")
    definitions = root / "definitions"
    shutil.copytree(EXAMPLES, definitions)
    (definitions / "doomed.yaml").write_text(DOOMED_DEFINITION)
    code = root / "code"
    code.mkdir()
    (code / "doomed_jobs.py").write_text(DOOMED_JOB)
    env = clean_env(PYTHONPATH=str(code))
    # The job module is on PYTHONPATH, outside the server's working directory: allow it (and
    # the examples) explicitly, as an operator would (docs/worker_policy.md).
    allow = ["--python-module", "doomed_jobs", "--python-module", "tickwheel.examples"]
    proc = start_server(
        root / "run", "--definitions", str(definitions), *allow, definitions=False, env=env
    )
    try:
        yield proc
    finally:
        proc.stop()


def api_call(server: ServerProcess, method: str, path: str, **kw: Any) -> Any:
    r = httpx.request(method, server.url + path, headers=server.headers(), timeout=10, **kw)
    assert r.status_code < 300, r.text
    return r.json()


def submit(server: ServerProcess, definition: str, n: int = 1) -> list[str]:
    body = {"definitionUri": f"registry://jobs/{definition}", "inputs": {"name": "Ada"}}
    return [api_call(server, "POST", "/v1/executions", json=body)["executionId"] for _ in range(n)]


def wait_status(server: ServerProcess, execution_id: str, status: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if api_call(server, "GET", f"/v1/executions/{execution_id}")["status"] == status:
            return
        time.sleep(0.1)  # bounded poll of a real server
    raise AssertionError(f"{execution_id} did not reach {status}")


def test_the_dashboard_in_a_real_browser(server: ServerProcess, tmp_path: Path) -> None:
    problems: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.set_default_timeout(15_000)
            _sign_in(page, server)
            _counts_change_live(page, server, tmp_path)
            _execution_and_attempts(page, server, tmp_path)
            _replay_a_dead_letter(page, server, tmp_path)
            _pause_a_cron_job(page, server, tmp_path)
            _edit_a_cron_job(page, server, tmp_path)
            _pause_a_definition(page, server, tmp_path)
            _cluster_lists_the_worker(page, tmp_path)
            page.set_viewport_size({"width": 390, "height": 844})
            page.goto(server.url + "/")
            page.wait_for_selector("#live-state:has-text('live')")
            page.screenshot(path=str(tmp_path / "phone-overview.png"), full_page=True)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, f"the overview scrolls sideways on a phone ({width}px)"
        finally:
            browser.close()
    assert problems == [], problems


def _sign_in(page: Any, server: ServerProcess) -> None:
    page.goto(server.url + "/")
    assert "/dashboard/signin" in page.url
    # Keyboard first: the key field has focus, Tab reaches the real submit button.
    assert page.evaluate("document.activeElement.id") == "api_key"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Sign in"
    page.fill("#api_key", "tw_wrong_key")
    page.click("button[type=submit]")
    assert page.locator("[role=alert]").inner_text().startswith("the API key is unknown")
    page.fill("#api_key", server.admin_key)
    page.keyboard.press("Enter")
    page.wait_for_url(server.url + "/")
    assert page.locator("h1").first.inner_text().startswith("Overview")


def _count(page: Any, status: str) -> int:
    text = page.locator(f"[data-count={status}]").first.inner_text()
    return int(text) if text.isdigit() else -1


def _counts_change_live(page: Any, server: ServerProcess, tmp_path: Path) -> None:
    page.wait_for_selector("#live-state:has-text('live')")
    before = _count(page, "SUCCEEDED")
    assert before >= 0
    submit(server, "hello", 5)
    page.wait_for_function(
        "n => Number(document.querySelector('[data-count=SUCCEEDED]').textContent) >= n",
        arg=before + 5,
    )
    page.wait_for_function("document.querySelector('#chart-starts polyline') !== null")
    page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)


def _execution_and_attempts(page: Any, server: ServerProcess, tmp_path: Path) -> None:
    [eid] = submit(server, "hello")
    wait_status(server, eid, "SUCCEEDED")
    page.click("nav >> text=Executions")
    page.locator(f"a[href='/dashboard/executions/{eid}']").click()
    page.wait_for_selector("#attempts .attempt")
    timeline = page.locator("#attempts").inner_text()
    assert "Attempt 1" in timeline and "fencing token" in timeline and "SUCCEEDED" in timeline
    assert page.locator("text=Hello, Ada").count() >= 1
    page.screenshot(path=str(tmp_path / "execution.png"), full_page=True)


def _replay_a_dead_letter(page: Any, server: ServerProcess, tmp_path: Path) -> None:
    [eid] = submit(server, "doomed")
    wait_status(server, eid, "FAILED")
    page.click("nav >> text=Dead letters")
    assert "the input file is corrupt" in page.locator("main").inner_text()
    page.screenshot(path=str(tmp_path / "dead-letters.png"), full_page=True)
    page.check(f"#dl-{eid}")
    page.click("text=Replay selected")
    assert "Replayed 1 of 1" in page.locator(".notice").inner_text()
    history = api_call(server, "GET", f"/v1/executions/{eid}/history")["items"]
    assert [h["kind"] for h in history] == ["replayed"]


def _pause_a_cron_job(page: Any, server: ServerProcess, tmp_path: Path) -> None:
    job = {
        "name": "every-minute",
        "definitionUri": "registry://jobs/hello",
        "expression": "* * * * *",
        "timezone": "Europe/Berlin",
        "inputs": {"name": "Cron"},
    }
    api_call(server, "POST", "/v1/cron-jobs", json=job)
    page.click("nav >> text=Cron jobs")
    page.fill("#p-expr", "0 9 * * mon-fri")
    page.wait_for_function("document.querySelectorAll('#preview-out li').length === 5")
    page.click("button[aria-label='Pause every-minute']")
    assert "every-minute: PAUSED" in page.locator(".notice").inner_text()
    assert page.locator("button[aria-label='Resume every-minute']").count() == 1
    assert api_call(server, "GET", "/v1/cron-jobs/every-minute")["status"] == "PAUSED"
    page.screenshot(path=str(tmp_path / "cron-jobs.png"), full_page=True)


def _pause_a_definition(page: Any, server: ServerProcess, tmp_path: Path) -> None:
    page.click("nav >> text=Definitions")
    page.click("a[href='/dashboard/definitions/hello']")
    page.fill("#pause-reason", "vendor outage")
    page.click("button:has-text('Pause')")
    assert page.locator(".notice").inner_text().startswith("Paused")
    assert page.locator("#paused-badge").inner_text() == "paused"
    assert "vendor outage" in page.locator("#pauses").inner_text()
    page.screenshot(path=str(tmp_path / "definition-paused.png"), full_page=True)
    [eid] = submit(server, "hello")
    time.sleep(1.0)  # due now, but held: a worker is woken far sooner than this
    assert api_call(server, "GET", f"/v1/executions/{eid}")["status"] == "READY"
    page.click("nav >> text=Definitions")
    assert page.locator("td .badge.paused").first.inner_text() == "paused"
    page.click("a[href='/dashboard/definitions/hello']")
    page.click("button:has-text('Resume')")
    assert page.locator(".notice").inner_text().startswith("Resumed")
    assert page.locator("#paused-badge").count() == 0
    wait_status(server, eid, "SUCCEEDED")


def _edit_a_cron_job(page: Any, server: ServerProcess, tmp_path: Path) -> None:
    page.click("a[aria-label='Edit every-minute']")
    page.fill("#e-expr", "15 8 * * *")
    # The preview follows the typing (debounced): Berlin 08:15 local, five of them.
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('#preview-out li'))"
        ".filter((li) => li.textContent.includes('T08:15:00')).length === 5"
    )
    page.fill("#e-inputs", '{"name": "Edited"}')
    page.screenshot(path=str(tmp_path / "cron-edit.png"), full_page=True)
    page.click("button:has-text('Save')")
    assert "every-minute: saved" in page.locator(".notice").inner_text()
    job = api_call(server, "GET", "/v1/cron-jobs/every-minute")
    assert job["expression"] == "15 8 * * *" and job["inputs"] == {"name": "Edited"}


def _cluster_lists_the_worker(page: Any, tmp_path: Path) -> None:
    # Keyboard: the nav link is reachable and followed with Enter.
    page.focus("nav >> text=Cluster")
    page.keyboard.press("Enter")
    page.wait_for_selector("#workers tr[data-state=alive]")
    assert page.locator("#workers-alive").inner_text().startswith("1 alive")
    page.screenshot(path=str(tmp_path / "cluster.png"), full_page=True)
    page.goto(page.url.rsplit("/dashboard", 1)[0] + "/")
    page.wait_for_function(
        "n => document.getElementById('workers-alive').textContent === n", arg="1"
    )
