"""The run policy's pure rules: denied addresses in every spelling, image references, python
modules, secret references and what registration refuses."""

from __future__ import annotations

import ipaddress

import pytest
from pydantic import ValidationError

from tickwheel.config import Settings
from tickwheel.domain.addresses import denied_reason, ip_from_host, parse_networks
from tickwheel.domain.definition_files import parse_definition
from tickwheel.domain.definitions import (
    CommandExecution,
    ContainerExecution,
    HttpExecution,
    PythonExecution,
)
from tickwheel.domain.errors import InvalidInput
from tickwheel.domain.run_policy import (
    RunPolicy,
    image_problem,
    python_module_problem,
    registration_problems,
    run_problems,
)
from tickwheel.domain.secret_refs import (
    MissingSecret,
    has_literal_credential,
    redact,
    render,
    template_problem,
)

LOOPBACK = parse_networks(["127.0.0.0/8"])


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("169.254.169.254", "169.254.169.254"),
        ("[::1]", "::1"),
        ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1"),
        ("10.0.0.1.", "10.0.0.1"),
    ],
)
def test_every_spelling_of_an_address_is_read_as_that_address(host: str, expected: str) -> None:
    assert ip_from_host(host) == ipaddress.ip_address(expected)


@pytest.mark.parametrize("host", ["example.com", "256.1.1.1", "1.2.3.4.5", "08.1.1.1", ""])
def test_names_and_impossible_addresses_are_not_addresses(host: str) -> None:
    assert ip_from_host(host) is None


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("fd00:ec2::254", "unique local"),
        ("fe80::1", "link-local"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
        ("64:ff9b::a00:1", "private"),
        ("2002:7f00:1::", "loopback"),
    ],
)
def test_denied_ranges_name_themselves(address: str, words: str) -> None:
    why = denied_reason(ipaddress.ip_address(address))
    assert why is not None and words in why


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700::1111", "8.8.8.8"])
def test_public_addresses_are_not_denied(address: str) -> None:
    assert denied_reason(ipaddress.ip_address(address)) is None


def test_allowed_networks_win_also_through_a_mapped_address() -> None:
    assert denied_reason(ipaddress.ip_address("127.0.0.1"), LOOPBACK) is None
    assert denied_reason(ipaddress.ip_address("::ffff:127.0.0.1"), LOOPBACK) is None
    assert denied_reason(ipaddress.ip_address("10.0.0.1"), LOOPBACK) is not None
    with pytest.raises(ValueError, match="not a network"):
        parse_networks(["10.0.0.0/33"])


@pytest.mark.parametrize(
    "image",
    [
        "alpine",
        "alpine:3",
        "docker.io/library/alpine:3.20",
        "localhost:5000/team/app:v1.2-rc_3",
        "ghcr.io/org/some__name/x-y:latest",
        "alpine@sha256:" + "a" * 64,
        "registry.example.com:443/a/b:t@sha256:" + "0" * 64,
    ],
)
def test_image_references_by_the_docker_grammar(image: str) -> None:
    assert image_problem(image) is None


@pytest.mark.parametrize(
    "image",
    ["--privileged", "--help", "-v", "Alpine", "alpine:", "alpine:-x", "a//b", "a b", "/alpine"],
)
def test_what_is_not_an_image_reference(image: str) -> None:
    assert image_problem(image) is not None


@pytest.mark.parametrize(
    ("module", "words"),
    [
        ("os", "standard library"),
        ("subprocess", "standard library"),
        ("os.path", "standard library"),
        ("builtins", "standard library"),
        ("sys", "standard library"),
        ("tickwheel", "tickwheel itself"),
        ("tickwheel.engine.runners.command", "tickwheel itself"),
        ("tickwheel.examplesx", "tickwheel itself"),
    ],
)
def test_no_worker_runs_the_standard_library_or_tickwheel_internals(
    module: str, words: str
) -> None:
    for policy in (RunPolicy(), RunPolicy(python_modules=(module,))):
        problem = python_module_problem(module, policy)
        assert problem is not None and words in problem


def test_module_prefixes_replace_the_default() -> None:
    policy = RunPolicy(python_modules=("myapp.jobs", "billing"))
    assert python_module_problem("myapp.jobs", policy) is None
    assert python_module_problem("myapp.jobs.nightly", policy) is None
    assert python_module_problem("billing", policy) is None
    assert "allowed module prefixes" in str(python_module_problem("myapp.jobsx", policy))
    assert "allowed module prefixes" in str(python_module_problem("tickwheel.examples", policy))
    # Registration does not judge one worker's prefixes: the registering process is no worker.
    assert python_module_problem("myapp.other", policy, per_worker=False) is None


def test_private_attributes_are_no_entrypoints() -> None:
    [problem] = registration_problems(PythonExecution("myjobs:__builtins__.eval"), RunPolicy())
    assert problem.path == "execution.entrypoint" and "private attribute" in problem.message


def test_commands_and_containers_run_only_where_enabled_and_listed() -> None:
    command, image = CommandExecution(("python3", "-c", "1")), ContainerExecution("alpine:3")
    assert "not enabled" in run_problems(command, RunPolicy())[0]
    assert "not enabled" in run_problems(image, RunPolicy())[0]
    listed = RunPolicy(commands=("python3",), container_images=("docker.io/library/*",))
    assert run_problems(command, listed) == []
    assert "allowed commands" in run_problems(CommandExecution(("/bin/sh",)), listed)[0]
    assert "matches none" in run_problems(image, listed)[0]
    assert run_problems(ContainerExecution("docker.io/library/alpine:3"), listed) == []
    anything = RunPolicy(commands=("*",), container_images=("*",))
    assert run_problems(CommandExecution(("/bin/sh",)), anything) == []
    # A bad reference is refused whatever the patterns say.
    assert "not an image reference" in run_problems(ContainerExecution("--privileged"), anything)[0]
    # Registration leaves enabling to each worker.
    assert registration_problems(command, RunPolicy()) == []
    assert registration_problems(image, RunPolicy()) == []


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/metrics",
        "http://[::1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://2130706433/",
        "http://0x7f.1/",
        "http://10.0.0.1/",
        "http://localhost:8000/metrics",
        "http://api.localhost/",
        "http://[::ffff:7f00:1]/",
    ],
)
def test_registration_refuses_literal_denied_destinations(url: str) -> None:
    [problem] = registration_problems(HttpExecution(url), RunPolicy())
    assert problem.path == "execution.url" and "TICKWHEEL_HTTP_ALLOW_NETWORKS" in problem.message
    allowed = RunPolicy(http_allow_networks=parse_networks(["0.0.0.0/0", "::/0"]))
    assert registration_problems(HttpExecution(url), allowed) == []


def test_registration_leaves_names_to_the_worker_and_honours_allowed_hosts() -> None:
    assert registration_problems(HttpExecution("https://hooks.example.com/x"), RunPolicy()) == []
    by_name = RunPolicy(http_allow_hosts=("localhost",))
    assert registration_problems(HttpExecution("http://localhost:9/x"), by_name) == []


def test_registration_refuses_credentials_written_into_a_definition() -> None:
    execution = HttpExecution(
        "https://user:pw@api.example.com/x?api_key=abc&page=2",
        "POST",
        (
            ("Authorization", "Bearer abcdef"),
            ("Cookie", "session=${{ secrets.SESSION }}0123456789abcdef0123"),
            ("X-Auth-Token", "t0k3n"),
            ("X-Source", "tickwheel"),
        ),
    )
    problems = {
        (p.path, p.message.split(":")[0]) for p in registration_problems(execution, RunPolicy())
    }
    assert (
        "execution.headers.Authorization",
        "carries a credential, which a definition may not hold",
    ) in problems
    assert any(path == "execution.headers.Cookie" for path, _ in problems)
    assert any(path == "execution.headers.X-Auth-Token" for path, _ in problems)
    assert not any(path == "execution.headers.X-Source" for path, _ in problems)
    messages = " ".join(p.message for p in registration_problems(execution, RunPolicy()))
    assert "user:password@" in messages and "query parameter 'api_key'" in messages


def test_references_are_what_registration_wants() -> None:
    execution = HttpExecution(
        "https://api.example.com/x?api_key=${{ secrets.API_KEY }}&page=2",
        "POST",
        (
            ("Authorization", "Bearer ${{ secrets.API_TOKEN }}"),
            ("Cookie", "session=${{secrets.SESSION}}"),
        ),
    )
    assert registration_problems(execution, RunPolicy()) == []
    bad = HttpExecution("https://a.example/", "GET", (("X-Trace", "${{ inputs.id }}"),))
    [problem] = registration_problems(bad, RunPolicy())
    assert "only template allowed" in problem.message
    assert "upper case" in str(template_problem("${{ secrets.lower }}"))


def test_literal_credentials_and_references() -> None:
    assert has_literal_credential("Bearer abc")
    assert has_literal_credential("Basic ${{ secrets.A }} dXNlcjpwYXNzd29yZGxvbmdlcg==")
    assert not has_literal_credential("Bearer ${{ secrets.A }}")
    assert not has_literal_credential("")


def test_render_and_redact() -> None:
    used: list[str] = []
    values = {"A": "one&two", "B": "three"}
    text = render(
        "x=${{ secrets.A }}&y=${{secrets.B}}", values.get, quote=lambda v: v.upper(), resolved=used
    )
    assert text == "x=ONE&TWO&y=THREE"
    assert redact(f"echo {text} one&two", used) == "echo x=***&y=*** ***"
    with pytest.raises(MissingSecret, match="TICKWHEEL_SECRET_C") as caught:
        render("${{ secrets.C }}", values.get)
    assert caught.value.name == "C"


def test_parse_definition_refuses_what_no_worker_runs_with_every_problem() -> None:
    text = """
name: sneaky
version: 1
execution:
  type: http
  url: http://169.254.169.254/latest/meta-data/
  headers: {Authorization: "Bearer hunter2"}
"""
    with pytest.raises(InvalidInput, match="workers do not run: 2 problems") as caught:
        parse_definition(text, "yaml")
    assert {e.path for e in caught.value.errors} == {
        "execution.url",
        "execution.headers.Authorization",
    }
    for text in (
        "name: a\nversion: 1\nexecution: {type: python, entrypoint: 'os:system'}\n",
        "name: a\nversion: 1\nexecution: {type: container, image: '--privileged'}\n",
        "name: a\nversion: 1\nexecution: {type: http, url: 'http://[::1]:8000/metrics'}\n",
    ):
        with pytest.raises(InvalidInput):
            parse_definition(text, "yaml")
    allowed = RunPolicy(http_allow_networks=LOOPBACK)
    parse_definition(
        "name: a\nversion: 1\nexecution: {type: http, url: 'http://127.0.0.1:9/x'}\n",
        "yaml",
        policy=allowed,
    )


def test_settings_make_the_policy_from_comma_separated_lists() -> None:
    settings = Settings(
        python_modules="myapp.jobs, billing",
        commands="python3,",
        container_images="docker.io/library/*",
        http_allow_networks="127.0.0.0/8,::1",
        http_allow_hosts="billing.internal",
        _env_file=None,  # type: ignore[call-arg]
    )
    policy = settings.run_policy()
    assert policy.python_modules == ("myapp.jobs", "billing")
    assert policy.commands == ("python3",)
    assert policy.http_allow_networks == parse_networks(["127.0.0.0/8", "::1/128"])
    assert Settings(_env_file=None).run_policy() == RunPolicy()  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="not a network"):
        Settings(http_allow_networks="10.0.0.0/8,bogus")
