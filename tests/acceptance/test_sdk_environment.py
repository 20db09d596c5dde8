"""The SDK finds its server and key the way the CLI does: ``TICKWHEEL_URL`` and
``TICKWHEEL_API_KEY``, arguments winning; and the README's SDK snippet runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid

import pytest

from tests.acceptance.conftest import REPO, ServerProcess, clean_env, free_port
from tickwheel import AsyncClient, Client, Unauthorized


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch, server: ServerProcess) -> ServerProcess:
    monkeypatch.setenv("TICKWHEEL_URL", server.url)
    monkeypatch.setenv("TICKWHEEL_API_KEY", str(server.admin_key))
    return server


def test_client_without_arguments_reads_the_url_and_key_from_the_environment(
    environment: ServerProcess,
) -> None:
    key = f"env-{uuid.uuid4().hex[:8]}"
    with Client() as client:
        e = client.submit_after(60, "hello", {"name": "Env"}, idempotency_key=key)
        assert client.get(e.execution_id).idempotency_key == key


async def test_async_client_without_arguments_reads_the_environment_too(
    environment: ServerProcess,
) -> None:
    async with AsyncClient() as client:
        page = await client.list(limit=1)
        assert isinstance(page.items, list)


def test_arguments_win_over_the_environment(
    monkeypatch: pytest.MonkeyPatch, server: ServerProcess
) -> None:
    monkeypatch.setenv("TICKWHEEL_URL", f"http://127.0.0.1:{free_port()}")  # nobody listens
    monkeypatch.setenv("TICKWHEEL_API_KEY", "tw_wrong_wrong")
    with Client(server.url, api_key=server.admin_key) as client:
        assert client.list(limit=1).items is not None
    # Only the url given: the key still comes from the environment (and is the wrong one).
    with Client(server.url) as client, pytest.raises(Unauthorized) as refused:
        client.list(limit=1)
    assert "none was given" not in refused.value.message


def test_no_key_anywhere_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, server: ServerProcess
) -> None:
    monkeypatch.setenv("TICKWHEEL_URL", server.url)
    monkeypatch.delenv("TICKWHEEL_API_KEY", raising=False)
    with Client() as client, pytest.raises(Unauthorized) as refused:
        client.list(limit=1)
    assert "needs an API key and none was given" in refused.value.message
    assert "TICKWHEEL_API_KEY" in refused.value.message
    # An explicit empty key means "no key", whatever the environment holds.
    monkeypatch.setenv("TICKWHEEL_API_KEY", str(server.admin_key))
    with Client(api_key="") as client, pytest.raises(Unauthorized):
        client.list(limit=1)


def readme_sdk_snippet() -> str:
    readme = (REPO / "README.md").read_text()
    section = readme.split("**6. From Python:**", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    over_http = [b for b in blocks if "tickwheel.Client()" in b]
    assert over_http, "the README's tour has no tickwheel.Client() block after '6. From Python'"
    return str(over_http[0])


def test_the_readme_sdk_snippet_runs_as_written(server: ServerProcess) -> None:
    """With the two variables the tour exports (and the server's address), nothing else."""
    env = clean_env(TICKWHEEL_URL=server.url, TICKWHEEL_API_KEY=str(server.admin_key))
    result = subprocess.run(
        [sys.executable, "-c", readme_sdk_snippet()],
        cwd=server.directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "SCHEDULED"
