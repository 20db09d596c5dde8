"""The README's "From Python" runs as written: the job module and the script (a plain submit, a
delayed one, and one inside the caller's sqlite3 transaction) in a fresh folder, then a worker
whose code path is that folder runs what is due."""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tickwheel.domain.run_policy import RunPolicy
from tickwheel.engine.runners import default_runners
from tickwheel.engine.worker import Worker
from tickwheel.store.factory import open_store

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> dict[str, str]:
    """The section's python blocks by the file their first line names (``# myproject/jobs.py``)."""
    section = README.read_text().split("**6. From Python:**", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    named = {b.splitlines()[0].removeprefix("# "): b for b in blocks if b.startswith("# ")}
    assert set(named) >= {"myproject/jobs.py", "place_orders.py"}, named.keys()
    return named


def test_the_section_starts_with_app_job_and_connect() -> None:
    section = README.read_text().split("**6. From Python:**", 1)[1]
    first, second = re.findall(r"```python\n(.*?)```", section, re.S)[:2]
    assert "@app.job(" in first
    assert "tickwheel.connect(" in second
    assert "connection=conn" in second


async def _work(url: str, folder: Path) -> int:
    store = await open_store(url)
    try:
        runners = default_runners(policy=RunPolicy(python_paths=(str(folder),)))
        worker = Worker(store, worker_id="readme", runners=runners)
        ran = await worker.run_once()
        await worker.drain()
        return ran
    finally:
        await store.close()


def test_the_readme_python_snippets_run_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = python_blocks()
    (tmp_path / "myproject").mkdir()
    (tmp_path / "myproject" / "__init__.py").write_text("")
    (tmp_path / "myproject" / "jobs.py").write_text(blocks["myproject/jobs.py"])
    (tmp_path / "place_orders.py").write_text(blocks["place_orders.py"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
    run = subprocess.run(
        [sys.executable, "place_orders.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    monkeypatch.syspath_prepend(str(tmp_path))
    url = f"sqlite:///{tmp_path / 'tickwheel.db'}"
    assert asyncio.run(_work(url, tmp_path)) == 2  # o-1 and o-3; o-2 is five minutes away
    with sqlite3.connect(tmp_path / "tickwheel.db") as conn:
        rows = conn.execute(
            "SELECT json_extract(input_snapshot, '$.order_id'), status FROM executions ORDER BY 1"
        ).fetchall()
        orders = conn.execute("SELECT order_id FROM orders").fetchall()
    assert rows == [("o-1", "SUCCEEDED"), ("o-2", "SCHEDULED"), ("o-3", "SUCCEEDED")]
    assert orders == [("o-3",)]
