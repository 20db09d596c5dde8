"""Job Definition Files: the three front-ends that read YAML, JSON or XML text into a document.

YAML and JSON parse straight into a *document*: a mapping with the camelCase keys of the file.
XML is first converted into the same document shape. ``parse_definition`` hands the document to
``tickwheel.domain.definitions.definition_from_document``, the one place that checks it and
builds the model, naming every bad field by its dotted path.

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

import json
from pathlib import PurePath
from typing import Any, Final
from xml.etree.ElementTree import Element

import defusedxml.ElementTree as DefusedET
import yaml
from defusedxml import DefusedXmlException

from tickwheel.domain.definitions import Definition, definition_from_document
from tickwheel.domain.errors import BadRequest, ErrorList, FieldError, InvalidInput
from tickwheel.domain.fieldtypes import bool_from_text, number_from_text, value_from_text
from tickwheel.domain.jsonvalues import problems
from tickwheel.domain.run_policy import RunPolicy, registration_problems

__all__ = [
    "format_from_content_type",
    "format_from_filename",
    "parse_definition",
]

_MAX_YAML_NODES = 100_000


# -- parsing: text -> document -> model ----------------------------------------------------------


def parse_definition(data: str | bytes, fmt: str, *, policy: RunPolicy | None = None) -> Definition:
    """Parse a Job Definition File's text in ``fmt`` (yaml, json or xml) for registration.

    Raises BadRequest when the text cannot be read as ``fmt`` and InvalidInput, naming every bad
    field by its dotted path, when its content is wrong or it asks for what no worker runs
    (``run_policy.registration_problems``, judged by ``policy``, by default the default one).
    """
    kind = fmt.lower()
    if kind == "xml":
        errors = ErrorList()
        definition = definition_from_document(storable(_xml_document(data, errors)), errors=errors)
    elif kind == "json":
        definition = definition_from_document(_load_json(_text(data, "JSON")))
    elif kind == "yaml":
        definition = definition_from_document(_load_yaml(_text(data, "YAML")))
    else:
        raise BadRequest(f"unsupported definition format {fmt!r}; supported: yaml, json, xml")
    # Not inside definition_from_document: that also reads stored rows back, which must load
    # whatever the rules were when they were stored (a worker refuses them at run time instead).
    refused = registration_problems(definition.execution, policy or RunPolicy())
    if refused:
        count = len(refused)
        raise InvalidInput(
            f"definition {definition.name!r} asks for what workers do not run:"
            f" {count} problem{'s' * (count != 1)}",
            refused,
        )
    return definition


def _text(data: str | bytes, fmt: str) -> str:
    if isinstance(data, bytes):
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise BadRequest(f"definition is not valid UTF-8 {fmt} (byte {exc.start})") from exc
    return data.removeprefix("\ufeff")


def _load_json(text: str) -> Any:
    try:
        return storable(json.loads(text))
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
    return storable(doc)


def storable(doc: Any) -> Any:
    """``doc`` when every value in it can be stored and read back (no NUL, no lone surrogate, no
    integer beyond 64 bits, not nested too deep); else InvalidInput naming each place."""
    found = problems(doc, "")
    if found:
        raise InvalidInput(
            "the document holds values that cannot be stored",
            [FieldError(where.lstrip(".") or "document", message) for where, message in found],
        )
    return doc


# -- XML: converted into the document shape of YAML and JSON --------------------------------------


def _xml_document(data: str | bytes, errors: ErrorList) -> dict[str, Any]:
    try:
        root = DefusedET.fromstring(data)
    except DefusedET.ParseError as exc:
        (line, column), problem = exc.position, str(exc).split(": line ")[0]
        where = f"line {line}, column {column}"
        raise BadRequest(f"definition is not valid XML ({where}): {problem}") from exc
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
        elif key in ("circuitBreaker", "rateLimit"):
            # <circuitBreaker consecutiveFailures="5" coolDown="60s"/>, <rateLimit limit="10"
            # period="1s"/>: attributes only.
            if len(child):
                errors.add(key, f"<{key}> takes attributes, not elements")
            doc[key] = {k: number_from_text(v) for k, v in child.attrib.items()}
        elif key == "concurrency":  # <concurrency key="${{ inputs.c }}" limit="1" order="fifo"/>
            _xml_text(child, key, errors)
            doc[key] = {
                k: number_from_text(v) if k == "limit" else v for k, v in child.attrib.items()
            }
        elif key in ("version", "timeout", "startBy", "deadline"):
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
