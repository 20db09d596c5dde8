"""The execution block of a Job Definition: how a job runs (a python entrypoint, a command, an
HTTP request or a container), its checks (every bad field named by its dotted path under
``execution``) and its canonical form. ``definitions`` builds the whole definition on top."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

from tickwheel.domain.errors import ErrorList
from tickwheel.domain.fieldtypes import (
    check_keys,
    describe,
    json_type_name,
    read_str,
    read_str_list,
)

HTTP_METHODS: Final = ("GET", "POST", "PUT", "PATCH", "DELETE")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
ENTRYPOINT = re.compile(rf"{_IDENT}(\.{_IDENT})*:{_IDENT}(\.{_IDENT})*")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
ISOLATIONS: Final = ("none", "process")
"""``execution.isolation`` of python jobs: in the worker's process, or in a child process of its
own per attempt (a crash, ``os._exit`` or segfault then fails only that attempt)."""
_EXECUTION_KEYS = {
    "python": ("type", "entrypoint", "isolation"),
    "command": ("type", "argv"),
    "http": ("type", "url", "method", "headers"),
    "container": ("type", "image", "command"),
}


@dataclass(frozen=True)
class PythonExecution:
    type: ClassVar[str] = "python"
    entrypoint: str
    isolation: str = "none"


@dataclass(frozen=True)
class CommandExecution:
    type: ClassVar[str] = "command"
    argv: tuple[str, ...]


@dataclass(frozen=True)
class HttpExecution:
    type: ClassVar[str] = "http"
    url: str
    method: str = "POST"
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ContainerExecution:
    type: ClassVar[str] = "container"
    image: str
    command: tuple[str, ...] = ()


Execution = PythonExecution | CommandExecution | HttpExecution | ContainerExecution


def read_execution(raw: Any, errors: ErrorList) -> Execution | None:
    kinds = ", ".join(_EXECUTION_KEYS)
    if raw is None or not isinstance(raw, Mapping):
        problem = "is required" if raw is None else f"must be a mapping, got {json_type_name(raw)}"
        errors.add("execution", f"{problem}: a mapping with a type ({kinds}) and its settings")
        return None
    kind = raw.get("type")
    if not isinstance(kind, str) or kind not in _EXECUTION_KEYS:
        got = "missing" if kind is None else f"got {describe(kind)}"
        errors.add("execution.type", f"must be one of {kinds}; {got}")
        return None
    check_keys(raw, _EXECUTION_KEYS[kind], "execution", errors)
    if kind == "python":
        entrypoint = read_str(raw.get("entrypoint"), "execution.entrypoint", errors)
        if entrypoint is not None and not ENTRYPOINT.fullmatch(entrypoint):
            errors.add(
                "execution.entrypoint",
                "must look like 'package.module:function': dotted names on both sides of one"
                f" ':'; got {describe(entrypoint)}",
            )
            return None
        isolation = _read_isolation(raw.get("isolation"), errors)
        if entrypoint is None or isolation is None:
            return None
        return PythonExecution(entrypoint, isolation)
    if kind == "command":
        argv = read_str_list(raw.get("argv"), "execution.argv", errors, required=True)
        return None if argv is None else CommandExecution(argv)
    if kind == "container":
        image = read_str(raw.get("image"), "execution.image", errors)
        if image is not None and (not image or any(c.isspace() for c in image)):
            errors.add("execution.image", f"must be an image reference, got {describe(image)}")
            return None
        command = read_str_list(raw.get("command"), "execution.command", errors, required=False)
        return None if image is None or command is None else ContainerExecution(image, command)
    return _read_http(raw, errors)


def _read_isolation(raw: Any, errors: ErrorList) -> str | None:
    if raw is None:
        return "none"
    if raw not in ISOLATIONS:
        errors.add(
            "execution.isolation",
            f"must be one of {', '.join(ISOLATIONS)} ('process' runs each attempt in a child"
            f" process of its own); got {describe(raw)}",
        )
        return None
    return str(raw)


def _read_http(raw: Mapping[str, Any], errors: ErrorList) -> HttpExecution | None:
    url = read_str(raw.get("url"), "execution.url", errors)
    if url is not None and not _is_http_url(url):
        errors.add(
            "execution.url", f"must be an http or https URL with a host; got {describe(url)}"
        )
        url = None
    method = "POST" if raw.get("method") is None else raw["method"]
    if not isinstance(method, str) or method.upper() not in HTTP_METHODS:
        errors.add("execution.method", f"must be one of {', '.join(HTTP_METHODS)}")
        method = None
    headers: list[tuple[str, str]] = []
    raw_headers = {} if raw.get("headers") is None else raw["headers"]
    if not isinstance(raw_headers, Mapping):
        errors.add("execution.headers", "must be a mapping of header name to value")
        raw_headers = {}
    for name, value in raw_headers.items():
        path = f"execution.headers.{name}"
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            errors.add(path, "a header name must be a non-empty HTTP token")
        elif not isinstance(value, str) or "\r" in value or "\n" in value:
            errors.add(path, "a header value must be a string on one line")
        else:
            headers.append((name, value))
    if url is None or method is None or len(headers) != len(raw_headers):
        return None
    return HttpExecution(url, method.upper(), tuple(sorted(headers)))


_SECRET_REF = re.compile(r"\$\{\{\s*secrets\.[A-Za-z0-9_]*\s*\}\}")


def _is_http_url(url: str) -> bool:
    # A secret reference (``${{ secrets.NAME }}``, see secret_refs) may hold spaces; nothing else.
    url = _SECRET_REF.sub("x", url)
    if any(c.isspace() for c in url):
        return False
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError on a bad port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def execution_to_document(execution: Execution) -> dict[str, Any]:
    if isinstance(execution, PythonExecution):
        doc = {"type": execution.type, "entrypoint": execution.entrypoint}
        if execution.isolation != "none":  # only when set: see definition_to_document
            doc["isolation"] = execution.isolation
        return doc
    if isinstance(execution, CommandExecution):
        return {"type": execution.type, "argv": list(execution.argv)}
    if isinstance(execution, HttpExecution):
        headers = dict(execution.headers)
        return {
            "type": execution.type,
            "url": execution.url,
            "method": execution.method,
            "headers": headers,
        }
    return {"type": execution.type, "image": execution.image, "command": list(execution.command)}
