"""Job Definitions: the model, its three front-ends (YAML, JSON, XML) and its canonical form.

YAML and JSON parse straight into a *document*: a mapping with the camelCase keys of the file.
XML is first converted into the same document shape. ``definition_from_document`` is the one
place that checks a document and builds the model, naming every bad field by its dotted path.

The XML shape::

    <definition>
      <name>notify</name>
      <version>1</version>
      <description>Tell a webhook</description>
      <inputs>
        <input name="message" type="string"/>
        <input name="limit" type="integer" required="false" default="10" description="..."/>
      </inputs>
      <outputs><output name="status" type="integer"/></outputs>
      <execution type="http" url="http://127.0.0.1:9/hook" method="POST">
        <header name="X-Source">tickwheel</header>
      </execution>
      <timeout>30</timeout>
      <retry maxAttempts="3" baseDelay="1" maxDelay="60">
        <retryOn>error</retryOn><retryOn>timeout</retryOn>
      </retry>
    </definition>

The other executions are ``<execution type="python" entrypoint="pkg.mod:func"/>``,
``<execution type="command"><arg>python3</arg><arg>-c</arg>...</execution>`` and
``<execution type="container" image="..."><arg>...</arg></execution>`` (the args are its
command). Args are taken verbatim; other text is stripped. XML text becomes a number where one
is expected (``version``, ``timeout``, the retry attributes), a boolean for ``required``, and a
default becomes a value of its field's declared type (JSON text for ``object`` and ``array``).
Text that does not convert is kept as text, so that the checks report it by its path.

YAML timestamps are not resolved: ``2026-03-01`` stays the text written, as it would in JSON,
so that the same definition in any format is the same model with the same content hash.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit
from xml.etree.ElementTree import Element

import defusedxml.ElementTree as DefusedET
import yaml
from defusedxml import DefusedXmlException

from tickwheel.domain.errors import BadRequest, ErrorList, FieldError, InvalidInput
from tickwheel.domain.fieldtypes import (
    FieldSpec,
    FieldType,
    bool_from_text,
    check_keys,
    describe,
    field_to_document,
    join,
    json_type_name,
    number_from_text,
    parse_fields,
    quote,
    read_positive_int,
    read_seconds,
    read_str,
    read_str_list,
    validate_values,
    value_from_text,
)

__all__ = [
    "PERMANENT_KINDS",
    "RETRYABLE_KINDS",
    "CommandExecution",
    "ContainerExecution",
    "Definition",
    "Execution",
    "FieldSpec",
    "FieldType",
    "HttpExecution",
    "PythonExecution",
    "RetryPolicy",
    "content_hash",
    "definition_from_document",
    "definition_to_document",
    "diff_definitions",
    "format_from_content_type",
    "format_from_filename",
    "is_retryable",
    "parse_definition",
    "validate_values",
]

RETRYABLE_KINDS: Final = frozenset({"error", "timeout", "lost", "server_error"})
PERMANENT_KINDS: Final = frozenset(
    {"permanent", "invalid_output", "client_error", "missing_runtime"}
)
HTTP_METHODS: Final = ("GET", "POST", "PUT", "PATCH", "DELETE")

NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,127}")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
ENTRYPOINT = re.compile(rf"{_IDENT}(\.{_IDENT})*:{_IDENT}(\.{_IDENT})*")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_TOP_KEYS = ("name", "version", "description", "inputs", "outputs", "execution", "timeout", "retry")
_RETRY_KEYS = ("maxAttempts", "baseDelay", "maxDelay", "retryOn")
_EXECUTION_KEYS = {
    "python": ("type", "entrypoint"),
    "command": ("type", "argv"),
    "http": ("type", "url", "method", "headers"),
    "container": ("type", "image", "command"),
}
_MAX_YAML_NODES = 100_000


@dataclass(frozen=True)
class PythonExecution:
    type: ClassVar[str] = "python"
    entrypoint: str


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


@dataclass(frozen=True)
class RetryPolicy:
    """Which failures are retried, how often, and the bounds of the backoff between attempts."""

    max_attempts: int = 3
    base_delay: float = 1.0
    max_delay: float = 300.0
    retry_on: frozenset[str] = RETRYABLE_KINDS


def is_retryable(policy: RetryPolicy, kind: str) -> bool:
    """Whether a failure of ``kind`` may be retried; permanent and unknown kinds never are."""
    return kind in RETRYABLE_KINDS and kind in policy.retry_on


@dataclass(frozen=True, kw_only=True)
class Definition:
    """A versioned Job Definition; immutable once built (inputs and outputs are read-only)."""

    name: str
    version: int
    description: str = ""
    inputs: Mapping[str, FieldSpec] = field(default_factory=dict)
    outputs: Mapping[str, FieldSpec] = field(default_factory=dict)
    execution: Execution
    timeout: float = 300.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def __post_init__(self) -> None:
        # Own copies, read-only by type (Mapping); plain dicts so that definitions pickle and copy.
        object.__setattr__(self, "inputs", dict(self.inputs))
        object.__setattr__(self, "outputs", dict(self.outputs))

    @property
    def uri(self) -> str:
        return f"registry://jobs/{self.name}"


# -- parsing: text -> document -> model ----------------------------------------------------------


def parse_definition(data: str | bytes, fmt: str) -> Definition:
    """Parse a Job Definition File's text in ``fmt`` (yaml, json or xml).

    Raises BadRequest when the text cannot be read as ``fmt`` and InvalidInput, naming every bad
    field by its dotted path, when its content is wrong.
    """
    kind = fmt.lower()
    if kind == "xml":
        errors = ErrorList()
        return _build(_xml_document(data, errors), errors)
    if kind == "json":
        return _build(_load_json(_text(data, "JSON")), ErrorList())
    if kind == "yaml":
        return _build(_load_yaml(_text(data, "YAML")), ErrorList())
    raise BadRequest(f"unsupported definition format {fmt!r}; supported: yaml, json, xml")


def definition_from_document(doc: Mapping[str, Any]) -> Definition:
    """Check a document (what YAML and JSON parse into) and build its Definition."""
    return _build(doc, ErrorList())


def _text(data: str | bytes, fmt: str) -> str:
    if isinstance(data, bytes):
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise BadRequest(f"definition is not valid UTF-8 {fmt} (byte {exc.start})") from exc
    return data.removeprefix("\ufeff")


def _load_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise BadRequest(f"definition is not valid JSON ({where}): {exc.msg}") from exc
    except RecursionError as exc:
        raise BadRequest("definition is not valid JSON: nested too deeply") from exc


class _YamlLoader(yaml.SafeLoader):
    """SafeLoader that leaves timestamps as the text written, as JSON does."""


_YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _load_yaml(text: str) -> Any:
    try:
        doc = yaml.load(text, Loader=_YamlLoader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = exc.problem or exc.context or "unreadable"
        raise BadRequest(f"definition is not valid YAML{where}: {problem}") from exc
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise BadRequest(f"definition is not valid YAML: {exc}") from exc
    # Aliases share nodes, so a small text can expand into a huge (or cyclic) tree: bound the
    # work every later step does by counting the nodes of the expanded tree once, here.
    budget, stack = _MAX_YAML_NODES, [doc]
    while stack:
        node, budget = stack.pop(), budget - 1
        if budget < 0:
            raise BadRequest("definition is too large once its YAML aliases are expanded")
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return doc


def _build(doc: Any, errors: ErrorList) -> Definition:
    if not isinstance(doc, Mapping):
        errors.add(
            "", f"a definition must be a mapping at the top level, got {json_type_name(doc)}"
        )
        raise InvalidInput("invalid definition", errors.items)
    check_keys(doc, _TOP_KEYS, "", errors)
    name = _read_name(doc.get("name"), errors)
    version = read_positive_int(doc.get("version"), "version", errors, None)
    description = doc.get("description")
    if description is None:
        description = ""
    elif not isinstance(description, str):
        errors.add("description", f"must be a string, got {describe(description)}")
    inputs = parse_fields(doc.get("inputs"), "inputs", errors)
    outputs = parse_fields(doc.get("outputs"), "outputs", errors)
    execution = _read_execution(doc.get("execution"), errors)
    timeout = read_seconds(doc.get("timeout"), "timeout", errors, 300.0)
    retry = _read_retry(doc.get("retry"), errors)
    if (
        errors.items
        or name is None
        or version is None
        or execution is None
        or timeout is None
        or retry is None
    ):
        count = len(errors.items)
        what = f"definition {name!r}" if name else "definition"
        raise InvalidInput(f"invalid {what}: {count} problem{'s' * (count != 1)}", errors.items)
    return Definition(
        name=name,
        version=version,
        description=description,
        inputs=inputs,
        outputs=outputs,
        execution=execution,
        timeout=timeout,
        retry=retry,
    )


def _read_name(value: Any, errors: ErrorList) -> str | None:
    name = read_str(value, "name", errors)
    if name is None or NAME.fullmatch(name):
        return name
    errors.add(
        "name",
        f"must match ^{NAME.pattern}$: 1 to 128 lower-case letters, digits, '_', '.' or '-',"
        f" starting with a letter or digit; got {describe(name)}",
    )
    return None


def _read_execution(raw: Any, errors: ErrorList) -> Execution | None:
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
        return None if entrypoint is None else PythonExecution(entrypoint)
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


def _is_http_url(url: str) -> bool:
    if any(c.isspace() for c in url):
        return False
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError on a bad port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _read_retry(raw: Any, errors: ErrorList) -> RetryPolicy | None:
    if raw is None:
        return RetryPolicy()
    if not isinstance(raw, Mapping):
        errors.add("retry", f"must be a mapping with keys {', '.join(_RETRY_KEYS)}")
        return None
    check_keys(raw, _RETRY_KEYS, "retry", errors)
    attempts = read_positive_int(raw.get("maxAttempts"), "retry.maxAttempts", errors, 3)
    base = read_seconds(raw.get("baseDelay"), "retry.baseDelay", errors, 1.0)
    top = read_seconds(raw.get("maxDelay"), "retry.maxDelay", errors, 300.0)
    if base is not None and top is not None and top < base:
        given = "is" if "maxDelay" in raw else "defaults to"
        errors.add("retry.maxDelay", f"must be at least baseDelay ({base:g}) but {given} {top:g}")
        top = None
    kinds = _read_retry_on(raw.get("retryOn"), errors)
    if attempts is None or base is None or top is None or kinds is None:
        return None
    return RetryPolicy(attempts, base, top, kinds)


def _read_retry_on(raw: Any, errors: ErrorList) -> frozenset[str] | None:
    allowed = ", ".join(sorted(RETRYABLE_KINDS))
    if raw is None:
        return RETRYABLE_KINDS
    if not isinstance(raw, list):
        errors.add("retry.retryOn", f"must be a list of error kinds from: {allowed}")
        return None
    before = len(errors.items)
    for kind in raw:
        if isinstance(kind, str) and kind in PERMANENT_KINDS:
            errors.add(
                "retry.retryOn", f"{kind!r} is permanent and never retried; allowed: {allowed}"
            )
        elif not isinstance(kind, str) or kind not in RETRYABLE_KINDS:
            errors.add("retry.retryOn", f"unknown error kind {quote(kind)}; allowed: {allowed}")
    return frozenset(raw) if len(errors.items) == before else None


# -- XML: converted into the document shape of YAML and JSON --------------------------------------


def _xml_document(data: str | bytes, errors: ErrorList) -> dict[str, Any]:
    try:
        root = DefusedET.fromstring(data)
    except DefusedET.ParseError as exc:
        line, column = exc.position
        raise BadRequest(
            f"definition is not valid XML (line {line}, column {column}): {exc}"
        ) from exc
    except DefusedXmlException as exc:
        raise BadRequest(
            f"definition XML was refused ({type(exc).__name__}): entity declarations, external"
            " references and DTDs are not allowed"
        ) from exc
    if root.tag != "definition":
        bad = FieldError("", f"the root element must be <definition>, got <{root.tag}>")
        raise InvalidInput("invalid definition", [bad])
    doc: dict[str, Any] = {}
    for child in root:
        key = child.tag
        if key in doc:
            errors.add(key, f"<{key}> appears more than once")
        elif key in ("inputs", "outputs"):
            doc[key] = _xml_fields(child, key, errors)
        elif key == "execution":
            doc[key] = _xml_execution(child, errors)
        elif key == "retry":
            doc[key] = _xml_retry(child, errors)
        elif key in ("version", "timeout"):
            doc[key] = number_from_text(_xml_text(child, key, errors))
        else:
            doc[key] = _xml_text(child, key, errors)
    return doc


def _xml_text(element: Element, path: str, errors: ErrorList) -> str:
    if len(element):
        errors.add(path, f"<{element.tag}> holds text, not elements")
    return (element.text or "").strip()


def _xml_fields(element: Element, key: str, errors: ErrorList) -> dict[str, Any]:
    tag, fields = key[:-1], dict[str, Any]()
    for child in element:
        name = child.get("name")
        if child.tag != tag:
            errors.add(key, f"unexpected <{child.tag}>: <{key}> holds only <{tag}> elements")
        elif not name:
            errors.add(key, f"every <{tag}> needs a name attribute")
        elif name in fields:
            errors.add(f"{key}.{name}", "is declared more than once")
        else:
            decl: dict[str, Any] = {k: v for k, v in child.attrib.items() if k != "name"}
            if "required" in decl:
                decl["required"] = bool_from_text(decl["required"])
            if "default" in decl:
                decl["default"] = value_from_text(decl.get("type"), decl["default"])
            fields[name] = decl
    return fields


def _xml_execution(element: Element, errors: ErrorList) -> dict[str, Any]:
    doc: dict[str, Any] = dict(element.attrib)
    args: list[str] = []
    headers: dict[str, str] = {}
    for child in element:
        name = child.get("name")
        if child.tag == "arg":
            args.append(child.text or "")
        elif child.tag != "header":
            errors.add(f"execution.{child.tag}", "unexpected: <execution> holds <arg> and <header>")
        elif not name or name in headers:
            errors.add("execution.headers", "every <header> needs a name attribute of its own")
        else:
            headers[name] = (child.text or "").strip()
    if args:
        doc[{"command": "argv", "container": "command"}.get(doc.get("type", ""), "arg")] = args
    if headers:
        doc["headers"] = headers
    return doc


def _xml_retry(element: Element, errors: ErrorList) -> dict[str, Any]:
    doc: dict[str, Any] = {key: number_from_text(text) for key, text in element.attrib.items()}
    for child in element:
        if child.tag == "retryOn":
            doc.setdefault("retryOn", []).append(_xml_text(child, "retry.retryOn", errors))
        else:
            errors.add(f"retry.{child.tag}", "unexpected: <retry> holds only <retryOn> elements")
    return doc


# -- the canonical document, its hash, and differences --------------------------------------------


def definition_to_document(d: Definition) -> dict[str, Any]:
    """The canonical JSON-able document: fields in long form, ``retryOn`` sorted."""
    return {
        "name": d.name,
        "version": d.version,
        "description": d.description,
        "inputs": {name: field_to_document(spec) for name, spec in d.inputs.items()},
        "outputs": {name: field_to_document(spec) for name, spec in d.outputs.items()},
        "execution": _execution_to_document(d.execution),
        "timeout": float(d.timeout),
        "retry": {
            "maxAttempts": d.retry.max_attempts,
            "baseDelay": float(d.retry.base_delay),
            "maxDelay": float(d.retry.max_delay),
            "retryOn": sorted(d.retry.retry_on),
        },
    }


def _execution_to_document(execution: Execution) -> dict[str, Any]:
    if isinstance(execution, PythonExecution):
        return {"type": execution.type, "entrypoint": execution.entrypoint}
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


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def content_hash(d: Definition) -> str:
    """sha256 (hex) of the canonical document; the same definition in any format or key order
    has the same hash."""
    return hashlib.sha256(_canonical_json(definition_to_document(d)).encode()).hexdigest()


def diff_definitions(a: Definition, b: Definition) -> list[str]:
    """Sorted dotted paths whose values differ between two definitions' canonical documents."""
    paths: list[str] = []
    _diff(definition_to_document(a), definition_to_document(b), "", paths)
    return sorted(paths)


def _diff(a: Any, b: Any, path: str, paths: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a.keys() | b.keys():
            sub = join(path, key)
            if key in a and key in b:
                _diff(a[key], b[key], sub, paths)
            else:
                paths.append(sub)
    elif _canonical_json(a) != _canonical_json(b):  # so that 1 and 1.0 or true differ
        paths.append(path)


# -- formats --------------------------------------------------------------------------------------

_CONTENT_TYPES: Final = {
    "application/json": "json",
    "application/yaml": "yaml",
    "application/x-yaml": "yaml",
    "text/yaml": "yaml",
    "text/x-yaml": "yaml",
    "application/xml": "xml",
    "text/xml": "xml",
}
_EXTENSIONS: Final = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".xml": "xml"}


def format_from_content_type(content_type: str | None) -> str:
    """The definition format of a media type (parameters such as charset are ignored);
    structured suffixes (``application/vnd.x+json``) count. Raises BadRequest otherwise."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media in _CONTENT_TYPES:
        return _CONTENT_TYPES[media]
    suffix = media.rpartition("+")[2]
    if "/" in media and "+" in media and suffix in ("json", "yaml", "xml"):
        return suffix
    given = f"unsupported content type {content_type!r}" if content_type else "no content type"
    raise BadRequest(f"{given}; supported: {', '.join(_CONTENT_TYPES)}")


def format_from_filename(name: str) -> str:
    """The definition format of a file name by its extension. Raises BadRequest otherwise."""
    extension = PurePath(name).suffix.lower()
    if extension in _EXTENSIONS:
        return _EXTENSIONS[extension]
    raise BadRequest(f"unsupported definition file {name!r}; supported: {', '.join(_EXTENSIONS)}")
