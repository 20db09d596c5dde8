"""Each runner applies the worker's run policy before it runs anything, and refuses for good:
python modules (looked up before any import), commands, images, http destinations (after DNS,
then pinned) and secrets."""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.engine.helpers import LoopbackServer, Seen, context, definition
from tickwheel.domain.addresses import IPAddress, parse_networks
from tickwheel.domain.definitions import (
    CommandExecution,
    ContainerExecution,
    HttpExecution,
    PythonExecution,
)
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.engine.runners import (
    CommandRunner,
    ContainerRunner,
    HttpRunner,
    PythonRunner,
    RunOutcome,
    run_attempt,
)
from tickwheel.engine.runners.secrets import Secrets

LOOPBACK = RunPolicy(http_allow_networks=parse_networks(["127.0.0.0/8", "::1/128"]))


async def run_python(
    entrypoint: str, policy: RunPolicy, outputs: dict[str, str] | None = None, **inputs: object
) -> RunOutcome:
    runner = PythonRunner(policy=policy)
    try:
        d = definition(PythonExecution(entrypoint), **(outputs or {}))
        return await run_attempt(d, dict(inputs), context(), runners={"python": runner})
    finally:
        runner.close()


# -- python ---------------------------------------------------------------------------------------


async def test_os_system_is_refused_for_good_and_never_called(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    for policy in (RunPolicy(), RunPolicy(python_modules=("os",))):
        outcome = await run_python("os:system", policy, command=f"touch {marker}")
        assert outcome.kind == "permanent", outcome
        assert "standard library" in outcome.message
    assert not marker.exists()


@pytest.fixture
def code(tmp_path: Path) -> Iterator[Path]:
    """A folder on sys.path with a module whose import leaves a mark, and a package too."""
    folder = tmp_path / "code"
    (folder / "noisy_pkg").mkdir(parents=True)
    marker = tmp_path / "imported"
    (folder / "noisy_mod.py").write_text(
        f"with open({str(marker)!r}, 'a') as f:\n    f.write('mod')\n"
        "def job():\n    return {'ok': True}\n"
    )
    (folder / "noisy_pkg" / "__init__.py").write_text(
        f"with open({str(marker)!r}, 'a') as f:\n    f.write('pkg')\n"
    )
    (folder / "noisy_pkg" / "jobs.py").write_text("import os\nfrom os import getpid\n")
    sys.path.insert(0, str(folder))
    try:
        yield folder
    finally:
        sys.path.remove(str(folder))
        for name in ("noisy_mod", "noisy_pkg", "noisy_pkg.jobs"):
            sys.modules.pop(name, None)


async def test_the_default_runs_only_modules_under_the_code_paths_and_imports_nothing_else(
    code: Path, tmp_path: Path
) -> None:
    elsewhere = RunPolicy(python_paths=(str(tmp_path / "other"),))
    for entrypoint in ("noisy_mod:job", "noisy_pkg.jobs:getpid"):
        outcome = await run_python(entrypoint, elsewhere)
        assert (
            outcome.kind == "permanent" and "not under this worker's code paths" in outcome.message
        )
    # Looked up, not imported: neither the module nor the package's __init__ ran.
    assert not (tmp_path / "imported").exists()
    outcome = await run_python(
        "noisy_mod:job", RunPolicy(python_paths=(str(code),)), {"ok": "boolean"}
    )
    assert outcome == RunOutcome(ok=True, output={"ok": True})


async def test_installed_packages_need_the_operators_prefixes() -> None:
    outcome = await run_python("yaml:safe_load", RunPolicy(), stream="a: 1")
    assert outcome.kind == "permanent" and "installed package" in outcome.message
    policy = RunPolicy(python_modules=("yaml",))
    allowed = await run_python("yaml:safe_load", policy, {"a": "integer"}, stream="a: 1")
    assert allowed == RunOutcome(ok=True, output={"a": 1})


async def test_an_allowed_module_is_no_way_into_another(code: Path) -> None:
    policy = RunPolicy(python_paths=(str(code),))
    through_module = await run_python("noisy_pkg.jobs:os.system", policy, command="true")
    assert (
        through_module.kind == "permanent" and "reaches into module 'os'" in through_module.message
    )
    imported = await run_python("noisy_pkg.jobs:getpid", policy)
    assert imported.kind == "permanent" and "defined in 'posix'" in imported.message


async def test_examples_are_allowed_by_default_from_anywhere() -> None:
    outcome = await run_python(
        "tickwheel.examples.jobs:add", RunPolicy(), {"sum": "integer"}, a=1, b=2
    )
    assert outcome == RunOutcome(ok=True, output={"sum": 3})
    internal = await run_python("tickwheel.engine.runners.command:command_env", RunPolicy())
    assert internal.kind == "permanent" and "tickwheel itself" in internal.message


# -- command and container ------------------------------------------------------------------------


async def test_commands_run_only_when_enabled_and_listed(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    d = definition(CommandExecution((sys.executable, "-c", f"open({str(marker)!r}, 'w')")))
    for policy in (RunPolicy(), RunPolicy(commands=("python3",))):
        outcome = await run_attempt(
            d, {}, context(), runners={"command": CommandRunner(policy=policy)}
        )
        assert outcome.kind == "permanent" and "refused" in outcome.message
    assert not marker.exists()
    listed = CommandRunner(policy=RunPolicy(commands=(sys.executable,)))
    assert (await run_attempt(d, {}, context(), runners={"command": listed})).ok
    assert marker.exists()


async def test_a_command_does_not_inherit_the_workers_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TICKWHEEL_SECRET_API_TOKEN", "do-not-pass")
    code = "import json, os; print(json.dumps({'env': dict(os.environ)}))"
    d = definition(CommandExecution((sys.executable, "-c", code)), env="object")
    runner = CommandRunner(policy=RunPolicy(commands=("*",)))
    outcome = await run_attempt(d, {}, context(), runners={"command": runner})
    assert outcome.ok and outcome.output is not None
    assert "TICKWHEEL_SECRET_API_TOKEN" not in outcome.output["env"]
    assert outcome.output["env"]["TICKWHEEL_FENCING_TOKEN"] == "41"


@pytest.mark.parametrize("image", ["--privileged", "--help", "-v/:/host"])
async def test_an_option_is_never_an_image(tmp_path: Path, image: str) -> None:
    calls = tmp_path / "calls"
    runtime = tmp_path / "docker"
    runtime.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    runtime.chmod(0o755)
    runner = ContainerRunner(
        which=lambda name: str(runtime), policy=RunPolicy(container_images=("*",))
    )
    d = definition(ContainerExecution(image))
    outcome = await run_attempt(d, {}, context(), runners={"container": runner})
    assert outcome.kind == "permanent" and "not an image reference" in outcome.message
    assert not calls.exists()


async def test_containers_run_only_when_enabled_and_matching(tmp_path: Path) -> None:
    runtime = tmp_path / "docker"
    runtime.write_text("#!/bin/sh\necho '{\"ran\": true}'\n")
    runtime.chmod(0o755)
    d = definition(ContainerExecution("docker.io/library/alpine:3.20"), ran="boolean")
    for policy in (RunPolicy(), RunPolicy(container_images=("ghcr.io/*",))):
        runner = ContainerRunner(which=lambda name: str(runtime), policy=policy)
        outcome = await run_attempt(d, {}, context(), runners={"container": runner})
        assert outcome.kind == "permanent" and "refused" in outcome.message
    allowed = RunPolicy(container_images=("docker.io/library/alpine:*",))
    runner = ContainerRunner(which=lambda name: str(runtime), policy=allowed)
    outcome = await run_attempt(d, {}, context(), runners={"container": runner})
    assert outcome == RunOutcome(ok=True, output={"ran": True})


NO_DAEMON = """#!/bin/sh
echo "docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. \
Is the docker daemon running?" >&2
exit 125
"""


async def test_a_runtime_without_its_engine_is_a_missing_runtime(tmp_path: Path) -> None:
    runtime = tmp_path / "docker"
    runtime.write_text(NO_DAEMON)
    runtime.chmod(0o755)
    runner = ContainerRunner(
        which=lambda name: str(runtime), policy=RunPolicy(container_images=("*",))
    )
    d = definition(ContainerExecution("alpine:3"))
    outcome = await run_attempt(d, {}, context(), runners={"container": runner})
    assert outcome.kind == "missing_runtime", outcome
    assert "cannot reach its engine" in outcome.message


# -- http -----------------------------------------------------------------------------------------


async def echo(request: Seen) -> tuple[int, dict[str, str], bytes]:
    return 200, {"Content-Type": "application/json"}, b'{"seen": true}'


async def echo_auth_and_fail(request: Seen) -> tuple[int, dict[str, str], bytes]:
    body = f"denied for {request.headers.get('authorization')} {request.path} " + "x" * 5000
    return 500, {}, body.encode()


@pytest.fixture
async def server() -> AsyncIterator[LoopbackServer]:
    s = LoopbackServer({"/echo": echo, "/fail?key=k%26y": echo_auth_and_fail})
    await s.start()
    yield s
    await s.close()


def http_runner(
    policy: RunPolicy, names: dict[str, str] | None = None, **secrets: str
) -> HttpRunner:
    async def resolve(host: str, port: int) -> list[IPAddress]:
        if names and host in names:
            return [ipaddress.ip_address(names[host])]
        raise OSError(f"no such host {host}")

    environ = {f"TICKWHEEL_SECRET_{k}": v for k, v in secrets.items()}
    return HttpRunner(policy=policy, resolve=resolve, secrets=Secrets(environ=environ))


async def call(runner: HttpRunner, url: str, *headers: tuple[str, str]) -> RunOutcome:
    d = definition(HttpExecution(url, "POST", headers), seen="boolean")
    return await run_attempt(d, {}, context(), runners={"http": runner})


async def test_loopback_is_not_reached_by_default_and_is_when_allowed(
    server: LoopbackServer,
) -> None:
    port = server.url.rsplit(":", 1)[1]
    for url in (
        server.url + "/echo",
        f"http://[::ffff:127.0.0.1]:{port}/echo",
        f"http://2130706433:{port}/echo",
        f"http://localhost:{port}/echo",
    ):
        outcome = await call(http_runner(RunPolicy(), {"localhost": "127.0.0.1"}), url)
        assert outcome.kind == "permanent" and "loopback" in outcome.message, outcome
    assert server.seen == []
    outcome = await call(http_runner(LOOPBACK), server.url + "/echo")
    assert outcome == RunOutcome(ok=True, output={"seen": True})
    assert len(server.seen) == 1


@pytest.mark.parametrize(
    "url", ["http://169.254.169.254/latest/meta-data/", "http://[::1]:9/", "http://10.0.0.1/"]
)
async def test_metadata_private_and_v6_loopback_are_refused_before_connecting(url: str) -> None:
    outcome = await call(http_runner(RunPolicy()), url)
    assert outcome.kind == "permanent" and "workers do not call" in outcome.message


async def test_a_name_is_judged_by_every_address_it_resolves_to(server: LoopbackServer) -> None:
    port = server.url.rsplit(":", 1)[1]
    url = f"http://internal.test:{port}/echo"
    refused = await call(http_runner(RunPolicy(), {"internal.test": "127.0.0.1"}), url)
    assert (
        refused.kind == "permanent"
        and "'internal.test' is 127.0.0.1, a loopback" in refused.message
    )
    assert server.seen == []
    # Allowed by name: the request goes to the resolved, checked address (internal.test has no
    # DNS of its own), and the name stays the Host header.
    by_name = RunPolicy(http_allow_hosts=("*.test",))
    outcome = await call(http_runner(by_name, {"internal.test": "127.0.0.1"}), url)
    assert outcome.ok, outcome
    assert server.seen[0].headers["host"] == f"internal.test:{port}"


async def test_a_name_that_does_not_resolve_may_pass(server: LoopbackServer) -> None:
    outcome = await call(http_runner(RunPolicy()), "http://nowhere.test/x")
    assert outcome.kind == "error" and "cannot resolve" in outcome.message


async def test_secrets_are_filled_in_on_the_worker_and_masked_in_what_it_reports(
    server: LoopbackServer,
) -> None:
    runner = http_runner(LOOPBACK, API_TOKEN="s3cr3t-value", KEY="k&y")
    url = server.url + "/fail?key=${{ secrets.KEY }}"
    outcome = await call(runner, url, ("Authorization", "Bearer ${{ secrets.API_TOKEN }}"))
    assert server.seen[0].headers["authorization"] == "Bearer s3cr3t-value"
    assert server.seen[0].path == "/fail?key=k%26y"
    assert outcome.kind == "server_error"
    error = repr(outcome.error())
    assert "s3cr3t-value" not in error and "k%26y" not in error
    assert "Bearer ***" in error
    # The body reaches the error as a short excerpt only.
    assert outcome.detail is not None and len(outcome.detail["body_excerpt"]) <= 256


async def test_a_missing_secret_is_permanent_and_named(server: LoopbackServer) -> None:
    outcome = await call(
        http_runner(LOOPBACK), server.url + "/echo", ("Authorization", "Bearer ${{ secrets.NOPE }}")
    )
    assert outcome.kind == "permanent" and "secret 'NOPE' is not set" in outcome.message
    assert server.seen == []


async def test_a_literal_credential_stored_by_other_means_is_refused_at_run_time(
    server: LoopbackServer,
) -> None:
    outcome = await call(
        http_runner(LOOPBACK), server.url + "/echo", ("Authorization", "Bearer abc")
    )
    assert outcome.kind == "permanent" and "reference a secret" in outcome.message
    assert server.seen == []


async def test_the_secrets_file_is_read_only_when_private(
    server: LoopbackServer, tmp_path: Path
) -> None:
    path = tmp_path / "secrets"
    path.write_text("# the hook's token\nAPI_TOKEN = from-the-file\n")
    path.chmod(0o644)
    runner = HttpRunner(policy=LOOPBACK, secrets=Secrets(environ={}, file=path))
    header = ("Authorization", "Bearer ${{ secrets.API_TOKEN }}")
    outcome = await call(runner, server.url + "/echo", header)
    assert outcome.kind == "permanent" and "chmod 600" in outcome.message
    path.chmod(0o600)
    assert (await call(runner, server.url + "/echo", header)).ok
    assert server.seen[-1].headers["authorization"] == "Bearer from-the-file"
