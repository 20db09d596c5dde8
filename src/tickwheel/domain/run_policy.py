"""What a worker will run: the operator's ``RunPolicy`` and the pure rules that apply it.

A definition is registered by whoever holds an admin key, but it runs on a worker with that
worker's rights, so the worker decides what it runs (docs/worker_policy.md):

- ``python``: never the standard library or tickwheel's own internals (``tickwheel.examples``
  aside); then either the operator's module prefixes, or by default only modules found under the
  worker's own code paths (that lookup is I/O: the python runner does it);
- ``command`` and ``container``: off unless the operator lists the executables / image patterns;
- ``http``: no loopback, link-local, private, multicast... addresses unless the operator allows
  their networks or host names (the http runner checks the addresses a name resolves to);
- credentials only as ``${{ secrets.NAME }}`` references (``secret_refs``).

Registration asks ``registration_problems`` (the rules every worker applies, and the addresses
a URL names literally); a worker asks ``run_problems`` before each attempt, which adds its own
allow-lists. Both are pure: no imports, no DNS.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import sys
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qsl, urlsplit

from tickwheel.domain.addresses import (
    IPNetwork,
    denied_reason,
    ip_from_host,
    is_localhost_name,
)
from tickwheel.domain.definitions import (
    CommandExecution,
    ContainerExecution,
    Execution,
    HttpExecution,
    PythonExecution,
)
from tickwheel.domain.errors import FieldError
from tickwheel.domain.secret_refs import has_literal_credential, is_sensitive_name, template_problem

__all__ = [
    "ANY",
    "EXAMPLES_MODULE",
    "RunPolicy",
    "host_is_allowed",
    "image_problem",
    "python_module_problem",
    "registration_problems",
    "run_problems",
    "uses_default_python_rule",
]

ANY: Final = "*"
EXAMPLES_MODULE: Final = "tickwheel.examples"

# The docker reference grammar (distribution/reference), lower-case repository path.
_ALNUM = r"[a-z0-9]+"
_COMPONENT = rf"{_ALNUM}(?:(?:__|[._]|-+){_ALNUM})*"
_DOMAIN_PART = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9A-Fa-f:]+\])(?::[0-9]+)?"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}"
IMAGE_REFERENCE: Final = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*)(?::{_TAG})?(?:@{_DIGEST})?"
)


@dataclass(frozen=True)
class RunPolicy:
    """One worker's rules (the settings of docs/worker_policy.md). The default runs python from
    the worker's own code paths and ``tickwheel.examples``, no commands, no containers, and
    http only to public addresses."""

    python_modules: tuple[str, ...] = ()
    """Module prefixes python entrypoints may come from; empty: the default rule."""
    python_paths: tuple[str, ...] = ()
    """The worker's code paths (``--path``) for the default rule; empty: the working directory."""
    commands: tuple[str, ...] = ()
    """Executables (``argv[0]`` as written) commands may run; empty: none; ``*``: any."""
    container_images: tuple[str, ...] = ()
    """Image patterns (``fnmatch``, e.g. ``docker.io/library/*``); empty: none; ``*``: any."""
    http_allow_networks: tuple[IPNetwork, ...] = ()
    """Networks http executions may reach although they are in a denied range."""
    http_allow_hosts: tuple[str, ...] = ()
    """Host names (``*.internal.example`` for a suffix) reachable whatever they resolve to."""


# -- python ---------------------------------------------------------------------------------------


def _under(module: str, prefix: str) -> bool:
    prefix = prefix.rstrip(".")
    return module == prefix or module.startswith(prefix + ".")


def python_module_problem(module: str, policy: RunPolicy, *, per_worker: bool = True) -> str | None:
    """Why no worker (or, with ``per_worker``, this one) may import ``module``; None if it may,
    subject to the default rule's look at where the module lives (``uses_default_python_rule``)."""
    top = module.partition(".")[0]
    if top in sys.stdlib_module_names or top in sys.builtin_module_names or top == "__main__":
        return (
            f"module {module!r} is part of the Python standard library: a worker never runs it"
            " (point the entrypoint at a function of your own code)"
        )
    if top == "tickwheel" and not _under(module, EXAMPLES_MODULE):
        return (
            f"module {module!r} is part of tickwheel itself: only {EXAMPLES_MODULE} may be an"
            " entrypoint"
        )
    prefixes = policy.python_modules if per_worker else ()
    if prefixes and not any(_under(module, prefix) for prefix in prefixes):
        return (
            f"module {module!r} is not among this worker's allowed module prefixes"
            f" ({', '.join(prefixes)}; TICKWHEEL_PYTHON_MODULES)"
        )
    return None


def uses_default_python_rule(module: str, policy: RunPolicy) -> bool:
    """Whether ``module`` must also be found under the worker's code paths: the default rule
    (no prefixes configured), for anything but ``tickwheel.examples``."""
    return not policy.python_modules and not _under(module, EXAMPLES_MODULE)


def _python_problems(execution: PythonExecution, policy: RunPolicy, per_worker: bool) -> list[str]:
    module, _, attributes = execution.entrypoint.partition(":")
    problems = []
    if any(name.startswith("_") for name in attributes.split(".")):
        problems.append(
            f"entrypoint {execution.entrypoint!r} names a private attribute (starting with '_')"
        )
    problem = python_module_problem(module, policy, per_worker=per_worker)
    return problems + ([problem] if problem else [])


# -- container and command ------------------------------------------------------------------------


def image_problem(image: str) -> str | None:
    """Why ``image`` is not an image reference (``[registry/]path[:tag][@digest]``), or None.
    A reference starts with a letter or digit, so it can never be read as a runtime option."""
    match = IMAGE_REFERENCE.fullmatch(image) if len(image) <= 512 else None
    if match is None or len(match.group("name")) > 255:
        return (
            f"{image[:100]!r} is not an image reference: [registry[:port]/]name[:tag][@digest],"
            " the name in lower case, e.g. docker.io/library/alpine:3.20"
        )
    return None


def _container_problems(execution: ContainerExecution, policy: RunPolicy) -> list[str]:
    if not policy.container_images:
        return ["container executions are not enabled on this worker (TICKWHEEL_CONTAINER_IMAGES)"]
    if not any(
        p == ANY or fnmatch.fnmatchcase(execution.image, p) for p in policy.container_images
    ):
        patterns = ", ".join(policy.container_images)
        return [
            f"image {execution.image!r} matches none of this worker's image patterns ({patterns})"
        ]
    return []


def _command_problems(execution: CommandExecution, policy: RunPolicy) -> list[str]:
    if not policy.commands:
        return ["command executions are not enabled on this worker (TICKWHEEL_COMMANDS)"]
    program = execution.argv[0] if execution.argv else ""
    if ANY not in policy.commands and program not in policy.commands:
        allowed = ", ".join(policy.commands)
        return [f"executable {program!r} is not among this worker's allowed commands ({allowed})"]
    return []


# -- http -----------------------------------------------------------------------------------------


def host_is_allowed(host: str, policy: RunPolicy) -> bool:
    """Whether the operator allowed ``host`` by name (then any address it resolves to goes)."""
    name = host.lower().removesuffix(".")
    for allowed in policy.http_allow_hosts:
        pattern = allowed.lower().removesuffix(".")
        if name == pattern or (pattern.startswith("*.") and name.endswith(pattern[1:])):
            return True
    return False


def _http_problems(execution: HttpExecution, policy: RunPolicy) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    url = execution.url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        problems.append(("execution.url", f"scheme {parts.scheme!r}: only http and https"))
    if parts.username is not None or parts.password is not None:
        problems.append(
            (
                "execution.url",
                "holds credentials (user:password@): send them in a header that references a"
                " secret, e.g. Authorization: Bearer ${{ secrets.API_TOKEN }}",
            )
        )
    for part, where in ((parts.netloc, "its host"), (parts.path, "its path")):
        if "${{" in part:
            problems.append(
                ("execution.url", f"a template in {where}: only the query may hold one")
            )
    host = parts.hostname or ""
    ip = _LOCALHOST if is_localhost_name(host) else ip_from_host(host)
    why = None if ip is None else denied_reason(ip, policy.http_allow_networks)
    if why and not host_is_allowed(host, policy):
        problems.append(
            (
                "execution.url",
                f"host {host!r} is {why}, which workers do not call unless the operator allows"
                " it (TICKWHEEL_HTTP_ALLOW_NETWORKS / TICKWHEEL_HTTP_ALLOW_HOSTS)",
            )
        )
    if url_template := template_problem(url):
        problems.append(("execution.url", url_template))
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if is_sensitive_name(name) and has_literal_credential(value):
            problems.append(("execution.url", f"query parameter {name!r}: {_USE_REFERENCE}"))
    for name, value in execution.headers:
        path = f"execution.headers.{name}"
        if header_template := template_problem(value):
            problems.append((path, header_template))
        elif is_sensitive_name(name) and has_literal_credential(value):
            problems.append((path, _USE_REFERENCE))
    return problems


_USE_REFERENCE: Final = (
    "carries a credential, which a definition may not hold: reference a secret instead,"
    " e.g. 'Bearer ${{ secrets.API_TOKEN }}', resolved on the worker from"
    " TICKWHEEL_SECRET_API_TOKEN or its secrets file"
)

_LOCALHOST: Final = ipaddress.IPv4Address("127.0.0.1")


# -- the two questions ----------------------------------------------------------------------------


def registration_problems(execution: Execution, policy: RunPolicy) -> list[FieldError]:
    """What registration refuses: the rules every worker applies, and (for http) the addresses a
    URL names literally, judged by ``policy`` (the registering process's settings). The
    per-worker allow-lists (module prefixes, commands, images) wait for the worker."""
    if isinstance(execution, PythonExecution):
        where = "execution.entrypoint"
        return [FieldError(where, p) for p in _python_problems(execution, policy, False)]
    if isinstance(execution, ContainerExecution):
        problem = image_problem(execution.image)
        return [FieldError("execution.image", problem)] if problem else []
    if isinstance(execution, HttpExecution):
        return [FieldError(path, message) for path, message in _http_problems(execution, policy)]
    return []


def run_problems(execution: Execution, policy: RunPolicy) -> list[str]:
    """What this worker refuses to run, before it looks anything up: the registration rules plus
    its own allow-lists. Each is a permanent failure: no retry changes the answer."""
    if isinstance(execution, PythonExecution):
        return _python_problems(execution, policy, True)
    problems = [f"{e.path}: {e.message}" for e in registration_problems(execution, policy)]
    if isinstance(execution, CommandExecution):
        problems += _command_problems(execution, policy)
    elif isinstance(execution, ContainerExecution):
        problems += _container_problems(execution, policy)
    return problems
