"""``tickwheel worker --app module:app`` as a real process: it registers the App's jobs and runs
what is submitted to them; a worker whose run policy would refuse them does not start."""

from __future__ import annotations

import sqlite3
import subprocess
from datetime import date
from pathlib import Path

import tickwheel
from tests.acceptance.conftest import REPO, TICKWHEEL, clean_env
from tests.client import pyjobs_sample

APP = "tests.client.pyjobs_sample:app"


def test_the_worker_registers_and_runs_the_apps_jobs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    with tickwheel.connect(url) as client:  # migrates the file before the worker opens it
        worker = subprocess.Popen(
            [str(TICKWHEEL), "worker", "--app", APP, "--concurrency", "2"],
            cwd=REPO,  # the default code path: the App's module is under it
            env=clean_env(TICKWHEEL_DATABASE_URL=url),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            pyjobs_sample.app.use(client)
            invoice = pyjobs_sample.Invoice(order_id="o-9", total_cents=10)
            sent = pyjobs_sample.send_invoice.submit(invoice=invoice, due=date(2027, 1, 31))
            added = pyjobs_sample.add_async.submit(a=20, b=22)
            assert client.wait(sent.execution_id, timeout=30).status == "SUCCEEDED"
            assert client.wait(added.execution_id, timeout=30).status == "SUCCEEDED"
            assert client.output(added.execution_id) == {"sum": 42, "attempt": 1}
            # The worker published them to the shared registry every tenant resolves (the
            # client may have registered its tenant's copy too, if it came first).
            with sqlite3.connect(tmp_path / "app.db") as db:
                shared = db.execute("SELECT name FROM definitions WHERE owner = ''").fetchall()
            assert sorted(shared) == [("add-async",), ("send-invoice",)]
        finally:
            pyjobs_sample.app.use(None)
            worker.terminate()
            output, _ = worker.communicate(timeout=30)
    assert worker.returncode == 0, output


def test_a_worker_whose_policy_refuses_the_jobs_does_not_start(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(TICKWHEEL), "worker", "--app", APP, "--python-module", "billing"],
        cwd=REPO,
        env=clean_env(TICKWHEEL_DATABASE_URL=f"sqlite:///{tmp_path / 'w.db'}"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "is refused" in result.stderr, result.stderr
    assert "billing" in result.stderr
