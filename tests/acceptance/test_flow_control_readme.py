"""The README's "Flow control" runs as written: its definition file and its commands against a
real server and the real CLI, and the executions run under the limit they asked for."""

from __future__ import annotations

import json
import re
import shlex

from tests.acceptance.conftest import REPO, ServerProcess, describe, run_cli


def section() -> str:
    text = (REPO / "README.md").read_text()
    return text.split("## Flow control\n", 1)[1].split("\n## ", 1)[0]


def test_the_flow_control_section_runs_as_written(server: ServerProcess) -> None:
    [yaml_block] = re.findall(r"```yaml\n(.*?)```", section(), re.S)
    [sh_block] = re.findall(r"```sh\n(.*?)```", section(), re.S)
    name = yaml_block.splitlines()[0].removeprefix("# ")
    (server.directory / name).write_text(yaml_block)
    outputs = []
    for line in sh_block.strip().splitlines():
        args = shlex.split(line)
        assert args[0] == "tickwheel", line
        result = run_cli(*args[1:], cwd=server.directory, server=server, as_json=True)
        assert result.returncode == 0, describe(result)
        outputs.append(result.stdout)
    first, second = (json.loads(out) for out in outputs[1:])
    assert first["status"] == "SUCCEEDED"
    assert first["concurrency"] == {"key": "acme", "limit": 1, "order": "fifo"}
    assert second["status"] == "SUCCEEDED"
    assert second["concurrency"] == {"key": "Ada", "limit": 2, "order": "fifo"}
