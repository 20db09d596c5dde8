"""Job Definitions: one model, three front-ends (YAML, JSON, XML), the canonical document, its
hash and differences, and an error for every bad field, by path."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tickwheel.domain.definition_files import (
    format_from_content_type,
    format_from_filename,
    parse_definition,
)
from tickwheel.domain.definitions import (
    PERMANENT_KINDS,
    RETRYABLE_KINDS,
    CommandExecution,
    ContainerExecution,
    Definition,
    FieldSpec,
    FieldType,
    HttpExecution,
    PythonExecution,
    RetryPolicy,
    content_hash,
    definition_from_document,
    definition_to_document,
    diff_definitions,
    is_retryable,
)
from tickwheel.domain.errors import BadRequest, InvalidInput
from tickwheel.domain.run_policy import RunPolicy, registration_problems

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "definitions"

NOTIFY_YAML = """\
name: notify
version: 1
description: Tell a webhook
inputs:
  message: string
  limit:
    type: integer
    required: false
    default: 10
    description: at most
  since:
    type: date
    default: 2026-03-01
  extra:
    type: object
    default: {"a": [1, 2]}
outputs:
  status: integer
execution:
  type: http
  url: https://hooks.example.com/hook
  method: POST
  headers:
    X-Source: tickwheel
    Accept: application/json
timeout: 30
retry:
  maxAttempts: 3
  baseDelay: 1
  maxDelay: 60
  retryOn: [timeout, error]
"""

NOTIFY_JSON = json.dumps(
    {
        "retry": {
            "retryOn": ["error", "timeout"],
            "maxDelay": 60,
            "baseDelay": 1,
            "maxAttempts": 3,
        },
        "timeout": 30.0,
        "execution": {
            "headers": {"Accept": "application/json", "X-Source": "tickwheel"},
            "url": "https://hooks.example.com/hook",
            "type": "http",
        },
        "outputs": {"status": "integer"},
        "inputs": {
            "message": {"type": "string"},
            "limit": {"type": "integer", "default": 10, "description": "at most"},
            "since": {"type": "date", "default": "2026-03-01", "required": False},
            "extra": {"type": "object", "default": {"a": [1, 2]}},
        },
        "description": "Tell a webhook",
        "version": 1,
        "name": "notify",
    }
)

NOTIFY_XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<definition>
  <name>notify</name>
  <version>1</version>
  <description>Tell a webhook</description>
  <inputs>
    <input name="message" type="string"/>
    <input name="limit" type="integer" required="false" default="10" description="at most"/>
    <input name="since" type="date" default="2026-03-01"/>
    <input name="extra" type="object" default='{"a": [1, 2]}'/>
  </inputs>
  <outputs><output name="status" type="integer"/></outputs>
  <execution type="http" url="https://hooks.example.com/hook" method="POST">
    <header name="X-Source">tickwheel</header>
    <header name="Accept">application/json</header>
  </execution>
  <timeout>30</timeout>
  <retry maxAttempts="3" baseDelay="1" maxDelay="60">
    <retryOn>error</retryOn><retryOn>timeout</retryOn>
  </retry>
</definition>
"""

NOTIFY = Definition(
    name="notify",
    version=1,
    description="Tell a webhook",
    inputs={
        "message": FieldSpec(FieldType.STRING),
        "limit": FieldSpec(FieldType.INTEGER, False, 10, "at most"),
        "since": FieldSpec(FieldType.DATE, False, "2026-03-01"),
        "extra": FieldSpec(FieldType.OBJECT, False, {"a": [1, 2]}),
    },
    outputs={"status": FieldSpec(FieldType.INTEGER)},
    execution=HttpExecution(
        "https://hooks.example.com/hook",
        "POST",
        (("Accept", "application/json"), ("X-Source", "tickwheel")),
    ),
    timeout=30.0,
    retry=RetryPolicy(3, 1.0, 60.0, frozenset({"error", "timeout"})),
)


def doc(**overrides: Any) -> dict[str, Any]:
    """A small valid document; a value of ``None`` in overrides removes the key."""
    base: dict[str, Any] = {
        "name": "greet",
        "version": 1,
        "inputs": {"name": "string"},
        "outputs": {"greeting": "string"},
        "execution": {"type": "python", "entrypoint": "tickwheel.examples.jobs:greet"},
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def by_path(exc: pytest.ExceptionInfo[InvalidInput]) -> dict[str, str]:
    """Each error path with its messages (joined by " | " when a path has several)."""
    found: dict[str, list[str]] = {}
    for error in exc.value.errors:
        found.setdefault(error.path, []).append(error.message)
    return {path: " | ".join(messages) for path, messages in found.items()}


def errors_of(document: Any) -> dict[str, str]:
    with pytest.raises(InvalidInput) as exc:
        definition_from_document(document)
    return by_path(exc)


def xml_errors(text: str) -> dict[str, str]:
    with pytest.raises(InvalidInput) as exc:
        parse_definition(text, "xml")
    return by_path(exc)


# -- one model, three front-ends ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fmt"), [(NOTIFY_YAML, "yaml"), (NOTIFY_JSON, "json"), (NOTIFY_XML, "xml")]
)
def test_each_format_parses_the_same_definition(text: str, fmt: str) -> None:
    parsed = parse_definition(text, fmt)
    assert parsed == NOTIFY
    assert content_hash(parsed) == content_hash(NOTIFY)
    assert parse_definition(text.encode(), fmt.upper()) == NOTIFY


def test_bytes_with_a_byte_order_mark() -> None:
    assert parse_definition(b"\xef\xbb\xbf" + NOTIFY_JSON.encode(), "json") == NOTIFY
    assert parse_definition("\ufeff" + NOTIFY_YAML, "yaml") == NOTIFY


@pytest.mark.parametrize(
    ("xml_execution", "expected"),
    [
        (
            '<execution type="python" entrypoint="pkg.mod:func"/>',
            PythonExecution("pkg.mod:func"),
        ),
        (
            '<execution type="command"><arg>python3</arg><arg>-c</arg>'
            "<arg> print(1) </arg></execution>",
            CommandExecution(("python3", "-c", " print(1) ")),
        ),
        (
            '<execution type="container" image="docker.io/library/alpine:3.20">'
            "<arg>echo</arg><arg>hi</arg></execution>",
            ContainerExecution("docker.io/library/alpine:3.20", ("echo", "hi")),
        ),
        (
            '<execution type="container" image="alpine"/>',
            ContainerExecution("alpine", ()),
        ),
        (
            '<execution type="http" url="https://example.com/x"/>',
            HttpExecution("https://example.com/x", "POST", ()),
        ),
    ],
)
def test_xml_execution_types(xml_execution: str, expected: Any) -> None:
    text = f"<definition><name>x</name><version>2</version>{xml_execution}</definition>"
    parsed = parse_definition(text, "xml")
    assert parsed.execution == expected
    assert parsed == Definition(name="x", version=2, execution=expected)


def test_defaults_of_an_empty_definition() -> None:
    parsed = definition_from_document(doc(inputs=None, outputs=None))
    assert parsed.description == ""
    assert parsed.inputs == {}
    assert parsed.outputs == {}
    assert parsed.timeout == 300.0
    assert parsed.retry == RetryPolicy(3, 1.0, 300.0, RETRYABLE_KINDS)
    assert parsed.uri == "registry://jobs/greet"


def test_null_is_the_same_as_absent_for_optional_keys() -> None:
    yaml_text = "name: x\nversion: 1\ndescription:\ninputs:\noutputs:\ntimeout:\nretry:\n"
    yaml_text += "execution: {type: http, url: 'http://h/', method: null, headers: null}\n"
    parsed = parse_definition(yaml_text, "yaml")
    assert parsed == Definition(name="x", version=1, execution=HttpExecution("http://h/"))


def test_yaml_dates_stay_the_text_written() -> None:
    text = doc(inputs={"at": {"type": "datetime", "default": "2026-03-01T09:30:00Z"}})
    yaml_text = yaml.safe_dump(text).replace("'2026-03-01T09:30:00Z'", "2026-03-01T09:30:00Z")
    assert "'" not in yaml_text
    parsed = parse_definition(yaml_text, "yaml")
    assert parsed.inputs["at"].default == "2026-03-01T09:30:00Z"
    assert parsed == definition_from_document(text)


def test_a_bad_date_in_yaml_is_a_field_error_not_a_crash() -> None:
    text = "name: x\nversion: 1\nexecution: {type: python, entrypoint: 'a:b'}\n"
    text += "inputs: {d: {type: date, default: 2026-02-30}}\n"
    with pytest.raises(InvalidInput) as exc:
        parse_definition(text, "yaml")
    assert [e.path for e in exc.value.errors] == ["inputs.d.default"]


def test_http_method_is_normalised_and_headers_sorted() -> None:
    execution = {
        "type": "http",
        "url": "https://h/x",
        "method": "put",
        "headers": {"b": "2", "a": "1"},
    }
    parsed = definition_from_document(doc(execution=execution))
    assert parsed.execution == HttpExecution("https://h/x", "PUT", (("a", "1"), ("b", "2")))


def test_definitions_are_immutable() -> None:
    parsed = parse_definition(NOTIFY_JSON, "json")
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.name = "other"  # type: ignore[misc]
    given_inputs = {"a": FieldSpec(FieldType.STRING)}
    built = Definition(name="x", version=1, inputs=given_inputs, execution=PythonExecution("a:b"))
    given_inputs["b"] = FieldSpec(FieldType.DATE)
    assert list(built.inputs) == ["a"]


def test_definitions_pickle_and_copy() -> None:
    parsed = parse_definition(NOTIFY_JSON, "json")
    assert pickle.loads(pickle.dumps(parsed)) == parsed
    assert copy.deepcopy(parsed) == parsed


def test_retry_kinds() -> None:
    assert {"error", "timeout", "lost", "server_error"} == RETRYABLE_KINDS
    assert {"permanent", "invalid_output", "client_error", "missing_runtime"} == PERMANENT_KINDS
    assert not RETRYABLE_KINDS & PERMANENT_KINDS
    policy = RetryPolicy(retry_on=frozenset({"timeout"}))
    assert is_retryable(policy, "timeout")
    assert not is_retryable(policy, "error")
    assert all(is_retryable(RetryPolicy(), kind) for kind in RETRYABLE_KINDS)
    assert not any(is_retryable(RetryPolicy(), kind) for kind in PERMANENT_KINDS)
    assert not is_retryable(RetryPolicy(retry_on=frozenset({"bogus"})), "bogus")


# -- the example files ----------------------------------------------------------------------------

EXAMPLE_FILES = sorted(p for p in EXAMPLES.iterdir() if p.is_file())


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_every_example_file_parses(path: Path) -> None:
    parsed = parse_definition(path.read_bytes(), format_from_filename(path.name))
    assert parsed.name == path.stem
    assert definition_from_document(definition_to_document(parsed)) == parsed


def test_examples_cover_every_format_and_execution_type() -> None:
    formats = {format_from_filename(p.name) for p in EXAMPLE_FILES}
    types = {
        parse_definition(p.read_bytes(), format_from_filename(p.name)).execution.type
        for p in EXAMPLE_FILES
    }
    assert formats == {"yaml", "json", "xml"}
    assert types == {"python", "command", "http", "container"}


def test_example_python_entrypoints_import_and_run() -> None:
    from tickwheel.examples import jobs

    assert jobs.greet("Ada") == {"greeting": "Hello, Ada!"}
    assert jobs.add(2, 3) == {"sum": 5}


# -- errors in content: InvalidInput, every bad field by path -------------------------------------


@pytest.mark.parametrize(
    ("overrides", "path", "message"),
    [
        ({"name": "Nightly Report"}, "name", "must match ^[a-z0-9][a-z0-9_.-]{0,127}$"),
        ({"name": "-x"}, "name", "starting with a letter or digit"),
        ({"name": "a" * 129}, "name", "1 to 128"),
        ({"name": "x\n"}, "name", "must match"),
        ({"name": 5}, "name", "must be a string, got integer 5"),
        ({"name": None}, "name", "is required"),
        ({"version": 0}, "version", "must be at least 1, got 0"),
        ({"version": -1}, "version", "must be at least 1"),
        ({"version": "1"}, "version", 'must be an integer, got string "1"'),
        ({"version": True}, "version", "must be an integer, got boolean true"),
        ({"version": 1.0}, "version", "must be an integer, got number 1.0"),
        ({"version": None}, "version", "is required"),
        ({"description": 5}, "description", "must be a string"),
        (
            {"colour": "red"},
            "colour",
            "unknown key 'colour'; allowed keys: name, version, description",
        ),
        ({"timeout": 0}, "timeout", "above 0"),
        ({"timeout": -5}, "timeout", "above 0"),
        ({"timeout": float("nan")}, "timeout", "finite"),
        ({"timeout": 10**400}, "timeout", "finite"),
        ({"timeout": True}, "timeout", "must be a number of seconds, got boolean"),
        ({"timeout": "30"}, "timeout", "must be a number of seconds, got string"),
        ({"inputs": ["name"]}, "inputs", "must be a mapping of field name to type"),
        ({"inputs": {"d": "dat"}}, "inputs.d.type", 'unknown type "dat"; allowed: string, integer'),
        ({"inputs": {"d": {"type": "int"}}}, "inputs.d.type", "unknown type"),
        ({"inputs": {"d": {"required": True}}}, "inputs.d.type", "is required"),
        (
            {"outputs": {"n": {"type": "integer", "default": "ten"}}},
            "outputs.n.default",
            "expected integer, got string",
        ),
        (
            {"inputs": {"n": {"type": "date", "default": "2026-02-30"}}},
            "inputs.n.default",
            "expected date",
        ),
        (
            {"inputs": {"n": {"type": "integer", "default": 1, "required": True}}},
            "inputs.n.required",
            "not required",
        ),
        (
            {"inputs": {"n": {"type": "integer", "required": "no"}}},
            "inputs.n.required",
            "true or false",
        ),
        ({"inputs": {"n": {"type": "integer", "min": 1}}}, "inputs.n.min", "unknown key 'min'"),
        ({"inputs": {"report-date": "date"}}, "inputs.report-date", "field names must match"),
        ({"inputs": {"1st": "date"}}, "inputs.1st", "field names must match"),
        ({"execution": None}, "execution", "is required"),
        ({"execution": "python"}, "execution", "must be a mapping"),
        (
            {"execution": {"entrypoint": "a:b"}},
            "execution.type",
            "must be one of python, command, http, container; missing",
        ),
        ({"execution": {"type": "lambda"}}, "execution.type", 'got string "lambda"'),
        ({"execution": {"type": ["python"]}}, "execution.type", "must be one of"),
        (
            {"execution": {"type": "python", "entrypoint": "a:b", "argv": []}},
            "execution.argv",
            "unknown key 'argv'; allowed keys: type, entrypoint",
        ),
        ({"execution": {"type": "python"}}, "execution.entrypoint", "is required"),
        (
            {"execution": {"type": "python", "entrypoint": "mod.func"}},
            "execution.entrypoint",
            "'package.module:function'",
        ),
        (
            {"execution": {"type": "python", "entrypoint": "a:b:c"}},
            "execution.entrypoint",
            "one ':'",
        ),
        (
            {"execution": {"type": "python", "entrypoint": "a.:b"}},
            "execution.entrypoint",
            "dotted names",
        ),
        (
            {"execution": {"type": "python", "entrypoint": "a-b:c"}},
            "execution.entrypoint",
            "dotted names",
        ),
        (
            {"execution": {"type": "python", "entrypoint": ":c"}},
            "execution.entrypoint",
            "dotted names",
        ),
        (
            {"execution": {"type": "command", "argv": "ls -l"}},
            "execution.argv",
            "must be a list of strings, not a shell string",
        ),
        ({"execution": {"type": "command", "argv": []}}, "execution.argv", "non-empty list"),
        ({"execution": {"type": "command"}}, "execution.argv", "non-empty list"),
        (
            {"execution": {"type": "command", "argv": ["ls", 5]}},
            "execution.argv.1",
            "must be a string, got integer",
        ),
        (
            {"execution": {"type": "command", "argv": ["", "x"]}},
            "execution.argv.0",
            "must not be empty",
        ),
        (
            {"execution": {"type": "http", "url": "ftp://h/x"}},
            "execution.url",
            "http or https URL with a host",
        ),
        ({"execution": {"type": "http", "url": "http:///x"}}, "execution.url", "with a host"),
        ({"execution": {"type": "http", "url": "http://h:port/"}}, "execution.url", "with a host"),
        ({"execution": {"type": "http", "url": "http://h /"}}, "execution.url", "with a host"),
        (
            {"execution": {"type": "http", "url": "http://h/", "method": "TRACE"}},
            "execution.method",
            "GET, POST, PUT, PATCH, DELETE",
        ),
        (
            {"execution": {"type": "http", "url": "http://h/", "headers": ["a"]}},
            "execution.headers",
            "mapping",
        ),
        (
            {"execution": {"type": "http", "url": "http://h/", "headers": {"X-A": "1\r\nX-B: 2"}}},
            "execution.headers.X-A",
            "one line",
        ),
        (
            {"execution": {"type": "http", "url": "http://h/", "headers": {"X A": "1"}}},
            "execution.headers.X A",
            "HTTP token",
        ),
        ({"execution": {"type": "container", "image": ""}}, "execution.image", "image reference"),
        (
            {"execution": {"type": "container", "image": "alpine", "command": "echo hi"}},
            "execution.command",
            "not a shell string",
        ),
        ({"retry": 3}, "retry", "must be a mapping"),
        ({"retry": {"maxAttempts": 0}}, "retry.maxAttempts", "must be at least 1"),
        ({"retry": {"maxAttempts": 2.5}}, "retry.maxAttempts", "must be an integer"),
        ({"retry": {"baseDelay": 0}}, "retry.baseDelay", "above 0"),
        (
            {"retry": {"baseDelay": 10, "maxDelay": 5}},
            "retry.maxDelay",
            "must be at least baseDelay (10) but is 5",
        ),
        ({"retry": {"baseDelay": 500}}, "retry.maxDelay", "but defaults to 300"),
        (
            {"retry": {"retryOn": ["error", "oops"]}},
            "retry.retryOn",
            'unknown error kind "oops"; allowed: error, lost, server_error, timeout',
        ),
        (
            {"retry": {"retryOn": ["permanent"]}},
            "retry.retryOn",
            "'permanent' is permanent and never retried",
        ),
        ({"retry": {"retryOn": "error"}}, "retry.retryOn", "must be a list"),
        (
            {"retry": {"max_attempts": 3}},
            "retry.max_attempts",
            "allowed keys: maxAttempts, baseDelay, maxDelay, retryOn",
        ),
    ],
)
def test_each_bad_field_is_named(overrides: dict[str, Any], path: str, message: str) -> None:
    errors = errors_of(doc(**overrides))
    assert path in errors, errors
    assert message in errors[path]


def test_every_error_is_reported_at_once() -> None:
    document = {
        "name": "Bad Name",
        "version": True,
        "extra": 1,
        "inputs": {"d": "dat", "limit": {"type": "integer", "default": "x"}},
        "execution": {"type": "command", "argv": "ls -l"},
        "timeout": 0,
        "retry": {"maxAttempts": 0, "baseDelay": 10, "maxDelay": 5, "retryOn": ["bogus"]},
    }
    with pytest.raises(InvalidInput) as exc:
        definition_from_document(document)
    assert sorted(e.path for e in exc.value.errors) == [
        "execution.argv",
        "extra",
        "inputs.d.type",
        "inputs.limit.default",
        "name",
        "retry.maxAttempts",
        "retry.maxDelay",
        "retry.retryOn",
        "timeout",
        "version",
    ]
    assert exc.value.message == "invalid definition: 10 problems"


def test_message_names_the_definition_when_its_name_is_good() -> None:
    with pytest.raises(InvalidInput, match=r"^invalid definition 'greet': 1 problem$"):
        definition_from_document(doc(version=0))


@pytest.mark.parametrize(
    ("text", "fmt"), [("[1, 2]", "json"), ("- a\n", "yaml"), ("", "yaml"), ("42", "json")]
)
def test_a_document_must_be_a_mapping(text: str, fmt: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        parse_definition(text, fmt)
    assert [e.path for e in exc.value.errors] == [""]
    assert "must be a mapping" in exc.value.errors[0].message


# -- XML conversion errors ------------------------------------------------------------------------

XML_HEAD = "<definition><name>x</name><execution type='python' entrypoint='a:b'/>"


@pytest.mark.parametrize(
    ("body", "path", "message"),
    [
        ("<version>one</version>", "version", 'must be an integer, got string "one"'),
        ("<version>1.5</version>", "version", "must be an integer, got number 1.5"),
        (
            "<version>1</version><timeout>soon</timeout>",
            "timeout",
            "must be a number of seconds, got string",
        ),
        (
            "<version>1</version><retry maxAttempts='three'/>",
            "retry.maxAttempts",
            "must be an integer",
        ),
        ("<version>1</version><retry baseDelay='x'/>", "retry.baseDelay", "must be a number"),
        (
            "<version>1</version><retry><retryOn>never</retryOn></retry>",
            "retry.retryOn",
            "unknown error kind",
        ),
        (
            "<version>1</version><retry><attempts>3</attempts></retry>",
            "retry.attempts",
            "only <retryOn>",
        ),
        ("<version>1</version><retry jitter='1'/>", "retry.jitter", "unknown key"),
        (
            "<version>1</version>"
            "<inputs><input name='n' type='integer' required='maybe'/></inputs>",
            "inputs.n.required",
            "true or false",
        ),
        (
            "<version>1</version><inputs><input name='n' type='integer' default='ten'/></inputs>",
            "inputs.n.default",
            "expected integer, got string",
        ),
        (
            "<version>1</version><inputs><input name='n' type='object' default='{bad'/></inputs>",
            "inputs.n.default",
            "expected object, got string",
        ),
        (
            "<version>1</version><inputs><input name='n' type='array' default='{}'/></inputs>",
            "inputs.n.default",
            "expected array, got object",
        ),
        ("<version>1</version><inputs><input name='n'/></inputs>", "inputs.n.type", "is required"),
        (
            "<version>1</version><inputs><input name='n' type='string' min='1'/></inputs>",
            "inputs.n.min",
            "unknown key",
        ),
        (
            "<version>1</version><inputs><input type='string'/></inputs>",
            "inputs",
            "needs a name attribute",
        ),
        (
            "<version>1</version><inputs><field name='n' type='string'/></inputs>",
            "inputs",
            "only <input> elements",
        ),
        (
            "<version>1</version><outputs><input name='n' type='string'/></outputs>",
            "outputs",
            "only <output> elements",
        ),
        (
            "<version>1</version><inputs><input name='n' type='string'/>"
            "<input name='n' type='date'/></inputs>",
            "inputs.n",
            "more than once",
        ),
        ("<version>1</version><version>2</version>", "version", "more than once"),
        ("<version>1</version><owner>me</owner>", "owner", "unknown key 'owner'"),
        (
            "<version>1</version><description><b>bold</b></description>",
            "description",
            "holds text, not elements",
        ),
    ],
)
def test_xml_errors_are_named_by_path(body: str, path: str, message: str) -> None:
    errors = xml_errors(XML_HEAD + body + "</definition>")
    assert path in errors, errors
    assert message in errors[path]


@pytest.mark.parametrize(
    ("execution", "path", "message"),
    [
        (
            "<execution type='python' entrypoint='a:b'><arg>x</arg></execution>",
            "execution.arg",
            "unknown key 'arg'",
        ),
        (
            "<execution type='command'><argv>ls</argv></execution>",
            "execution.argv",
            "<execution> holds <arg> and <header>",
        ),
        ("<execution type='command'/>", "execution.argv", "non-empty list"),
        (
            "<execution type='http' url='http://h/'><header>v</header></execution>",
            "execution.headers",
            "needs a name",
        ),
        (
            "<execution type='http' url='http://h/'>"
            "<header name='a'>1</header><header name='a'>2</header></execution>",
            "execution.headers",
            "of its own",
        ),
        (
            "<execution type='http' url='http://h/' verb='GET'/>",
            "execution.verb",
            "unknown key 'verb'",
        ),
        ("<execution url='http://h/'/>", "execution.type", "missing"),
    ],
)
def test_xml_execution_errors(execution: str, path: str, message: str) -> None:
    errors = xml_errors(f"<definition><name>x</name><version>1</version>{execution}</definition>")
    assert path in errors, errors
    assert message in errors[path]


def test_xml_root_must_be_definition() -> None:
    assert xml_errors("<job><name>x</name></job>") == {
        "": "the root element must be <definition>, got <job>"
    }


def test_xml_comments_are_ignored() -> None:
    text = (
        XML_HEAD.replace("<name>", "<!-- a comment --><name>") + "<version>1</version></definition>"
    )
    assert parse_definition(text, "xml").name == "x"


def test_xml_defaults_convert_by_declared_type() -> None:
    text = (
        XML_HEAD
        + "<version>1</version><inputs>"
        + "<input name='n' type='number' default='2.5'/>"
        + "<input name='b' type='boolean' default='true'/>"
        + "<input name='s' type='string' default='10'/>"
        + "<input name='a' type='array' default='[1, &quot;x&quot;]'/>"
        + "</inputs></definition>"
    )
    inputs = parse_definition(text, "xml").inputs
    assert {name: spec.default for name, spec in inputs.items()} == {
        "n": 2.5,
        "b": True,
        "s": "10",
        "a": [1, "x"],
    }


# -- text that cannot be read: BadRequest ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fmt", "message"),
    [
        ("name: x\n  version: [1\n", "yaml", "definition is not valid YAML (line 2"),
        ("a: b\n---\nc: d\n", "yaml", "not valid YAML"),
        ("!!python/object:os.system {}", "yaml", "not valid YAML"),
        (
            '{"name": "x",\n "version": }',
            "json",
            "definition is not valid JSON (line 2, column 13)",
        ),
        ("[" * 100_000, "json", "not valid JSON"),
        ("<definition><name>x</definition>", "xml", "definition is not valid XML (line 1, column"),
        ("", "xml", "not valid XML"),
    ],
)
def test_unreadable_text_is_a_bad_request(text: str, fmt: str, message: str) -> None:
    with pytest.raises(BadRequest) as exc:
        parse_definition(text, fmt)
    assert message in exc.value.message
    assert exc.value.code == "bad_request"


def test_invalid_utf8_is_a_bad_request() -> None:
    with pytest.raises(BadRequest, match="not valid UTF-8 YAML"):
        parse_definition(b"name: \xff\n", "yaml")


def test_unknown_format_is_a_bad_request() -> None:
    with pytest.raises(BadRequest, match="supported: yaml, json, xml"):
        parse_definition("{}", "toml")


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
  <!ENTITY lol "lol">
  <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
  <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
  <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
  <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
  <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
  <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
  <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<definition><name>&lol9;</name></definition>
"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE d [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<definition><name>&xxe;</name></definition>
"""


@pytest.mark.parametrize("text", [BILLION_LAUGHS, EXTERNAL_ENTITY], ids=["billion-laughs", "xxe"])
def test_xml_entity_attacks_are_refused(text: str) -> None:
    with pytest.raises(BadRequest, match="entity declarations, external references and DTDs"):
        parse_definition(text, "xml")
    with pytest.raises(BadRequest):
        parse_definition(text.encode(), "xml")


def test_yaml_alias_bomb_is_refused() -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    with pytest.raises(BadRequest, match="too large once its YAML aliases are expanded"):
        parse_definition("\n".join(lines) + "\n", "yaml")


def test_recursive_yaml_is_refused() -> None:
    with pytest.raises(BadRequest, match="too large"):
        parse_definition("name: &a [*a]\n", "yaml")


def test_yaml_anchors_of_reasonable_size_are_fine() -> None:
    text = (
        "name: x\nversion: 1\nexecution: {type: command, argv: &argv [echo, hi]}\n"
        "inputs: {a: {type: array, default: *argv}}\n"
    )
    assert parse_definition(text, "yaml").inputs["a"].default == ["echo", "hi"]


# -- formats --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "fmt"),
    [
        ("application/json", "json"),
        ("application/json; charset=utf-8", "json"),
        ("Application/JSON", "json"),
        ("application/yaml", "yaml"),
        ("application/x-yaml", "yaml"),
        ("text/yaml", "yaml"),
        ("text/x-yaml; charset=utf-8", "yaml"),
        ("application/xml", "xml"),
        ("text/xml;charset=utf-8", "xml"),
        ("application/vnd.tickwheel.definition+json", "json"),
        ("application/vnd.tickwheel.definition+xml", "xml"),
    ],
)
def test_format_from_content_type(content_type: str, fmt: str) -> None:
    assert format_from_content_type(content_type) == fmt


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/toml", "json", "+json", "", None]
)
def test_unsupported_content_type_lists_the_supported_ones(content_type: str | None) -> None:
    with pytest.raises(BadRequest) as exc:
        format_from_content_type(content_type)
    assert "supported: application/json, application/yaml" in exc.value.message
    assert "text/xml" in exc.value.message


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("a.yaml", "yaml"),
        ("a.yml", "yaml"),
        ("dir/A.YML", "yaml"),
        ("a.json", "json"),
        ("x.v2.xml", "xml"),
    ],
)
def test_format_from_filename(name: str, fmt: str) -> None:
    assert format_from_filename(name) == fmt


@pytest.mark.parametrize("name", ["a.toml", "yaml", "a.yaml.bak", ""])
def test_unsupported_filename(name: str) -> None:
    with pytest.raises(BadRequest, match=r"supported: \.yaml, \.yml, \.json, \.xml"):
        format_from_filename(name)


# -- canonical document, hash, diff ---------------------------------------------------------------


def test_canonical_document_is_long_form_and_sorted() -> None:
    assert definition_to_document(NOTIFY) == {
        "name": "notify",
        "version": 1,
        "description": "Tell a webhook",
        "inputs": {
            "message": {"type": "string", "required": True, "default": None, "description": ""},
            "limit": {
                "type": "integer",
                "required": False,
                "default": 10,
                "description": "at most",
            },
            "since": {
                "type": "date",
                "required": False,
                "default": "2026-03-01",
                "description": "",
            },
            "extra": {
                "type": "object",
                "required": False,
                "default": {"a": [1, 2]},
                "description": "",
            },
        },
        "outputs": {
            "status": {"type": "integer", "required": True, "default": None, "description": ""}
        },
        "execution": {
            "type": "http",
            "url": "https://hooks.example.com/hook",
            "method": "POST",
            "headers": {"Accept": "application/json", "X-Source": "tickwheel"},
        },
        "timeout": 30.0,
        "retry": {
            "maxAttempts": 3,
            "baseDelay": 1.0,
            "maxDelay": 60.0,
            "retryOn": ["error", "timeout"],
        },
    }


@pytest.mark.parametrize(
    ("execution", "document"),
    [
        (PythonExecution("a:b"), {"type": "python", "entrypoint": "a:b"}),
        (CommandExecution(("ls", "-l")), {"type": "command", "argv": ["ls", "-l"]}),
        (ContainerExecution("alpine"), {"type": "container", "image": "alpine", "command": []}),
    ],
)
def test_canonical_execution(execution: Any, document: dict[str, Any]) -> None:
    d = Definition(name="x", version=1, execution=execution)
    assert definition_to_document(d)["execution"] == document
    assert definition_from_document(definition_to_document(d)) == d


def test_canonical_document_is_a_copy() -> None:
    parsed = parse_definition(NOTIFY_JSON, "json")
    document = definition_to_document(parsed)
    document["inputs"]["extra"]["default"]["a"].append(3)
    assert parsed.inputs["extra"].default == {"a": [1, 2]}


def test_hash_ignores_key_order_and_format() -> None:
    reordered = json.dumps(dict(reversed(list(json.loads(NOTIFY_JSON).items()))))
    hashes = {
        content_hash(parse_definition(NOTIFY_JSON, "json")),
        content_hash(parse_definition(reordered, "json")),
        content_hash(parse_definition(NOTIFY_YAML, "yaml")),
        content_hash(parse_definition(NOTIFY_XML, "xml")),
    }
    assert len(hashes) == 1
    (digest,) = hashes
    assert len(digest) == 64
    assert int(digest, 16) >= 0


def test_hash_is_sha256_of_the_sorted_compact_document() -> None:
    import hashlib

    text = json.dumps(definition_to_document(NOTIFY), sort_keys=True, separators=(",", ":"))
    assert content_hash(NOTIFY) == hashlib.sha256(text.encode()).hexdigest()


def test_hash_changes_with_content() -> None:
    changed = dataclasses.replace(NOTIFY, description="Tell a webhook!")
    assert content_hash(changed) != content_hash(NOTIFY)


def test_diff_of_equal_definitions_is_empty() -> None:
    assert diff_definitions(NOTIFY, parse_definition(NOTIFY_XML, "xml")) == []


def test_diff_names_the_changed_paths() -> None:
    a = definition_from_document(doc(execution={"type": "command", "argv": ["ls"]}))
    b = definition_from_document(
        doc(execution={"type": "command", "argv": ["ls", "-l"]}, retry={"maxAttempts": 5})
    )
    assert diff_definitions(a, b) == ["execution.argv", "retry.maxAttempts"]


def test_diff_recurses_into_fields_and_sees_added_ones() -> None:
    a = definition_from_document(doc())
    b = definition_from_document(
        doc(
            inputs={"name": {"type": "string", "description": "who"}, "limit": "integer"},
            timeout=60,
        )
    )
    assert diff_definitions(a, b) == ["inputs.limit", "inputs.name.description", "timeout"]
    assert diff_definitions(b, a) == ["inputs.limit", "inputs.name.description", "timeout"]


def test_diff_tells_apart_values_python_thinks_equal() -> None:
    a = definition_from_document(doc(inputs={"x": {"type": "number", "default": 1}}))
    b = definition_from_document(doc(inputs={"x": {"type": "number", "default": 1.0}}))
    assert a == b  # 1 == 1.0 in Python, but not in the canonical JSON document
    assert diff_definitions(a, b) == ["inputs.x.default"]


def test_diff_when_execution_type_changes() -> None:
    a = definition_from_document(doc())
    b = definition_from_document(doc(execution={"type": "container", "image": "alpine"}))
    assert diff_definitions(a, b) == [
        "execution.command",
        "execution.entrypoint",
        "execution.image",
        "execution.type",
    ]


# -- round trip (property) ------------------------------------------------------------------------

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
TEXT = st.characters(exclude_characters="\x00", exclude_categories=("Cs",))
"""Storable text: tickwheel refuses NUL and lone surrogates in every stored value
(domain.jsonvalues); with any exclusion given, hypothesis no longer leaves surrogates out itself."""
JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    INT64,
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(TEXT, max_size=10),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(TEXT, max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
DEFAULTS: dict[str, st.SearchStrategy[Any]] = {
    "string": st.text(TEXT, max_size=20),
    "integer": INT64,
    "number": INT64 | st.floats(allow_nan=False, allow_infinity=False),
    "boolean": st.booleans(),
    "date": st.dates().map(lambda d: d.isoformat()),
    "datetime": st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat()),
    "uri": st.sampled_from(["https://example.com/a", "s3://b/k", "mailto:a@b.c"]),
    "object": st.dictionaries(st.text(TEXT, max_size=5), JSON_VALUES, max_size=3),
    "array": st.lists(JSON_VALUES, max_size=3),
}


@st.composite
def field_decls(draw: st.DrawFn) -> Any:
    type_name = draw(st.sampled_from(sorted(DEFAULTS)))
    form = draw(st.sampled_from(["short", "long", "default", "optional"]))
    if form == "short":
        return type_name
    decl: dict[str, Any] = {"type": type_name, "description": draw(st.text(TEXT, max_size=10))}
    if form == "default":
        decl["default"] = draw(DEFAULTS[type_name])
    elif form == "optional":
        decl["required"] = False
    return decl


FIELD_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)
ARGV = st.tuples(st.text(TEXT, min_size=1, max_size=10)).flatmap(
    lambda program: st.lists(st.text(TEXT, max_size=10), max_size=3).map(
        lambda a: program + tuple(a)
    )
)
EXECUTIONS = st.one_of(
    st.builds(PythonExecution, st.sampled_from(["a:b", "pkg.mod:func", "x.y.z:Cls.method"])),
    st.builds(
        CommandExecution,
        ARGV,
    ),
    st.builds(
        HttpExecution,
        st.sampled_from(["https://hooks.example.com/hook", "https://example.com/x?y=1"]),
        st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE"]),
        st.dictionaries(
            st.from_regex(r"[A-Za-z-]{1,10}", fullmatch=True),
            # Storable text only: a lone surrogate is refused when a text is parsed (the
            # document's values are checked), and with characters excluded hypothesis draws them.
            st.text(
                alphabet=st.characters(exclude_characters="\r\n\x00", exclude_categories=("Cs",)),
                max_size=10,
            ),
            max_size=3,
        ).map(lambda h: tuple(sorted(h.items()))),
    ),
    st.builds(
        ContainerExecution,
        st.sampled_from(["alpine", "docker.io/library/alpine:3.20"]),
        st.just(()) | ARGV,
    ),
)
SECONDS = st.floats(min_value=0.001, max_value=1e6, allow_nan=False)


@st.composite
def definitions(draw: st.DrawFn) -> Definition:
    base = draw(SECONDS)
    document = {
        "name": draw(st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,20}", fullmatch=True)),
        "version": draw(st.integers(min_value=1, max_value=10**9)),
        "description": draw(st.text(TEXT, max_size=30)),
        "inputs": draw(st.dictionaries(FIELD_NAMES, field_decls(), max_size=4)),
        "outputs": draw(st.dictionaries(FIELD_NAMES, field_decls(), max_size=3)),
        "timeout": draw(SECONDS),
        "retry": {
            "maxAttempts": draw(st.integers(min_value=1, max_value=100)),
            "baseDelay": base,
            "maxDelay": base + draw(st.floats(min_value=0, max_value=1e6)),
            "retryOn": draw(st.lists(st.sampled_from(sorted(RETRYABLE_KINDS)))),
        },
    }
    document["execution"] = definition_to_document(
        Definition(name="x", version=1, execution=draw(EXECUTIONS))
    )["execution"]
    return definition_from_document(document)


@settings(max_examples=200, deadline=None)
@given(definitions())
def test_canonical_document_round_trips(d: Definition) -> None:
    document = definition_to_document(d)
    assert definition_from_document(document) == d
    again = definition_from_document(json.loads(json.dumps(document)))
    assert again == d
    assert content_hash(again) == content_hash(d)
    assert diff_definitions(again, d) == []


@settings(max_examples=100, deadline=None)
@given(definitions())
def test_yaml_and_json_texts_of_the_canonical_document_parse_back(d: Definition) -> None:
    # Registration also refuses what no worker runs (a header like "Cookie: x" with a literal
    # value, say): tests/unit/test_run_policy.py covers those; here only the texts matter.
    assume(not registration_problems(d.execution, RunPolicy()))
    document = definition_to_document(d)
    assert parse_definition(json.dumps(document), "json") == d
    assert parse_definition(yaml.safe_dump(document), "yaml") == d


@settings(max_examples=50, deadline=None)
@given(definitions(), definitions())
def test_diff_is_empty_exactly_when_hashes_match(a: Definition, b: Definition) -> None:
    assert (diff_definitions(a, b) == []) == (content_hash(a) == content_hash(b))
    copied = copy.deepcopy(a)
    assert diff_definitions(a, copied) == []
