"""The README's cron example, run line by line against a real server, ends with nothing left
firing: its pause cancels what was materialised, and its last line deletes what it made."""

from __future__ import annotations

import json
import re
import shlex
import time
from typing import Any

import httpx

from tests.acceptance.conftest import REPO, ServerProcess, describe, run_cli, wait_on_api


def readme_cron_commands() -> list[list[str]]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Recurring jobs", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the Recurring jobs section has no sh block"
    commands = []
    for line in block.group(1).splitlines():
        line = line.split("  #", 1)[0].strip()
        if line.startswith("tickwheel "):
            commands += [shlex.split(part)[1:] for part in line.split(" && ")]
    return commands


def waiting(server: ServerProcess) -> list[dict[str, Any]]:
    """Executions of any cron job that are still to run."""
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=10) as http:
        r = http.get(
            "/v1/executions",
            params={"idempotencyKeyPrefix": "cron:", "status": "SCHEDULED,READY", "limit": 500},
        )
        assert r.status_code == 200, r.text
        items: list[dict[str, Any]] = r.json()["items"]
        return items


def test_the_readme_cron_example_leaves_nothing_firing(server: ServerProcess) -> None:
    commands = readme_cron_commands()
    assert ["cron", "delete", "every-5s"] in commands, "the example must end by deleting every-5s"
    for args in commands:
        if args[:2] == ["cron", "pause"]:
            # Let the service materialise a few occurrences first: the pause must cancel them.
            wait_on_api(server, "/v1/executions", lambda b: len(b["items"]) >= 2,
                        idempotencyKeyPrefix="cron:", status="SCHEDULED")  # fmt: skip
            assert waiting(server), "nothing was materialised ahead before the pause"
        result = run_cli(*args, cwd=server.directory, server=server)
        assert result.returncode == 0, describe(result)
        if args[:2] == ["cron", "pause"]:
            assert waiting(server) == [], "the pause left materialised occurrences to run"
    names = run_cli("--json", "cron", "list", cwd=server.directory, server=server)
    assert names.returncode == 0 and json.loads(names.stdout)["items"] == [], describe(names)
    assert waiting(server) == []
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=10) as http:
        before = http.get("/v1/executions", params={"limit": 500}).json()["items"]
        time.sleep(6)  # longer than every-5s's period, on the server's real clock
        after = http.get("/v1/executions", params={"limit": 500}).json()["items"]
    assert len(after) == len(before), "a cron job is still firing after the example"
