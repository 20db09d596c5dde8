"""Values against field types: the rules of each type, validate_values, and XML text conversion."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tickwheel.domain.errors import ErrorList, InvalidInput
from tickwheel.domain.fieldtypes import (
    FieldSpec,
    FieldType,
    bool_from_text,
    number_from_text,
    parse_fields,
    validate_values,
    value_from_text,
    value_problem,
)

T = FieldType


def paths(exc: pytest.ExceptionInfo[InvalidInput]) -> list[str]:
    return [e.path for e in exc.value.errors]


def messages(exc: pytest.ExceptionInfo[InvalidInput]) -> dict[str, str]:
    return {e.path: e.message for e in exc.value.errors}


# -- the rule of each type ------------------------------------------------------------------------

GOOD = [
    (T.STRING, ""),
    (T.STRING, "hello"),
    (T.INTEGER, 0),
    (T.INTEGER, -7),
    (T.INTEGER, 2**63 - 1),
    (T.INTEGER, -(2**63)),
    (T.NUMBER, 1),
    (T.NUMBER, 1.5),
    (T.NUMBER, -0.0),
    (T.BOOLEAN, True),
    (T.BOOLEAN, False),
    (T.DATE, "2026-03-01"),
    (T.DATE, "2024-02-29"),
    (T.DATETIME, "2026-03-01T09:30:00Z"),
    (T.DATETIME, "2026-03-01T09:30:00z"),
    (T.DATETIME, "2026-03-01t09:30:00+05:30"),
    (T.DATETIME, "2026-03-01 09:30:00-08:00"),
    (T.DATETIME, "2026-03-01T09:30:00.123456789Z"),
    (T.URI, "https://example.com/x?y=1"),
    (T.URI, "mailto:ada@example.com"),
    (T.URI, "s3://bucket/key"),
    (T.URI, "file:///tmp/x.png"),
    (T.URI, "urn:isbn:0451450523"),
    (T.OBJECT, {}),
    (T.OBJECT, {"a": [1, {"b": None}], "c": 1.5}),
    (T.ARRAY, []),
    (T.ARRAY, [1, "two", None, {"x": [True]}]),
]


@pytest.mark.parametrize(("ftype", "value"), GOOD)
def test_values_that_fit_their_type(ftype: FieldType, value: Any) -> None:
    assert value_problem(ftype, value) is None


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


BAD = [
    (T.STRING, 1, "expected string, got integer"),
    (T.STRING, None, "expected string, got null"),
    (T.INTEGER, True, "expected integer, got boolean"),
    (T.INTEGER, False, "expected integer, got boolean"),
    (T.INTEGER, 1.0, "expected integer, got number"),
    (T.INTEGER, "1", "expected integer, got string"),
    (T.INTEGER, 2**63, "outside the signed 64-bit range"),
    (T.NUMBER, -(2**63) - 1, "outside the signed 64-bit range"),
    (T.STRING, "a\x00b", "NUL"),
    (T.STRING, "\ud800", "lone surrogate"),
    (T.URI, "https://example.com/\x00", "NUL"),
    (T.ARRAY, nested(70), "nested too deep"),
    (T.OBJECT, {"a": {"b\ud800": 1}}, "lone surrogate"),
    (T.NUMBER, True, "expected number, got boolean"),
    (T.NUMBER, "1.5", "expected number, got string"),
    (T.NUMBER, math.nan, "expected a finite number, got nan"),
    (T.NUMBER, math.inf, "expected a finite number, got inf"),
    (T.NUMBER, -math.inf, "expected a finite number, got -inf"),
    (T.BOOLEAN, 1, "expected boolean, got integer"),
    (T.BOOLEAN, "true", "expected boolean, got string"),
    (T.DATE, "2026-02-30", "expected date (ISO YYYY-MM-DD)"),
    (T.DATE, "2026-13-01", "expected date"),
    (T.DATE, "2026-3-1", "expected date"),
    (T.DATE, "20260301", "expected date"),
    (T.DATE, "2026-03-01T00:00:00Z", "expected date"),
    (T.DATE, "2026-03-01\n", "expected date"),
    (T.DATE, 20260301, "expected date, got integer"),
    (T.DATETIME, "2026-03-01T09:30:00", "UTC offset or Z, got naive"),
    (T.DATETIME, "2026-03-01 09:30:00", "UTC offset or Z, got naive"),
    (T.DATETIME, "2026-03-01", "expected datetime (RFC 3339"),
    (T.DATETIME, "2026-02-30T09:30:00Z", "expected datetime"),
    (T.DATETIME, "2026-03-01T25:00:00Z", "expected datetime"),
    (T.DATETIME, "2026-03-01T09:30:00+24:00", "expected datetime"),
    (T.DATETIME, "2026-03-01T09:30Z", "expected datetime"),
    (T.DATETIME, 1740000000, "expected datetime, got integer"),
    (T.URI, "example.com", "expected uri"),
    (T.URI, "", "expected uri"),
    (T.URI, "https://exa mple.com", "expected uri"),
    (T.URI, "http://[::1", "expected uri"),
    (T.URI, ["https://x"], "expected uri, got array"),
    (T.OBJECT, [], "expected object, got array"),
    (T.OBJECT, "{}", "expected object, got string"),
    (T.OBJECT, {1: "a"}, "expected object of JSON values"),
    (T.OBJECT, {"a": math.nan}, "expected object of JSON values"),
    (T.OBJECT, {"a": {1, 2}}, "expected object of JSON values"),
    (T.ARRAY, {}, "expected array, got object"),
    (T.ARRAY, (1, 2), "expected array, got tuple"),
    (T.ARRAY, [math.inf], "expected array of JSON values"),
]


@pytest.mark.parametrize(("ftype", "value", "message"), BAD)
def test_values_that_do_not_fit_say_why(ftype: FieldType, value: Any, message: str) -> None:
    problem = value_problem(ftype, value)
    assert problem is not None
    assert message in problem


def test_deeply_nested_object_is_checked_without_recursion() -> None:
    value: Any = "leaf"
    for _ in range(5000):
        value = {"a": [value]}
    problem = value_problem(T.OBJECT, value)
    assert problem is not None and "nested too deep" in problem


# -- validate_values ------------------------------------------------------------------------------

SPECS = {
    "name": FieldSpec(T.STRING),
    "limit": FieldSpec(T.INTEGER, required=False, default=10),
    "tags": FieldSpec(T.ARRAY, required=False, default=["a"]),
    "since": FieldSpec(T.DATE, required=False),
}


def test_validate_values_applies_defaults_and_keeps_values_as_given() -> None:
    result = validate_values(SPECS, {"name": "Ada", "since": "2026-03-01"}, "inputs")
    assert result == {"name": "Ada", "limit": 10, "tags": ["a"], "since": "2026-03-01"}


def test_validate_values_omits_optional_fields_without_default() -> None:
    assert validate_values(SPECS, {"name": "Ada", "limit": 3}, "inputs") == {
        "name": "Ada",
        "limit": 3,
        "tags": ["a"],
    }


def test_defaults_are_copied_so_callers_cannot_change_the_spec() -> None:
    result = validate_values(SPECS, {"name": "Ada"}, "inputs")
    result["tags"].append("b")
    assert SPECS["tags"].default == ["a"]


def test_none_values_mean_no_values() -> None:
    assert validate_values({"limit": SPECS["limit"]}, None, "inputs") == {"limit": 10}
    assert validate_values({}, None, "outputs") == {}


def test_validate_values_names_every_bad_field() -> None:
    with pytest.raises(InvalidInput) as exc:
        validate_values(SPECS, {"limit": True, "since": "2026-02-30", "extra": 1}, "inputs")
    assert messages(exc) == {
        "inputs.name": "is required (string) but missing",
        "inputs.limit": "expected integer, got boolean",
        "inputs.since": 'expected date (ISO YYYY-MM-DD), got string "2026-02-30"',
        "inputs.extra": "not declared by the definition",
    }


def test_validate_values_message_names_the_context() -> None:
    with pytest.raises(InvalidInput) as exc:
        validate_values(SPECS, {}, "inputs", context="registry://jobs/greet version 2")
    assert exc.value.message == "inputs do not match the definition registry://jobs/greet version 2"
    assert exc.value.code == "invalid_input"
    assert exc.value.details == [
        {"path": "inputs.name", "message": "is required (string) but missing"}
    ]


def test_validate_values_message_without_context() -> None:
    with pytest.raises(InvalidInput, match=r"^outputs do not match the definition$"):
        validate_values({"status": FieldSpec(T.INTEGER)}, {"status": "200"}, "outputs")


def test_null_is_not_a_value_of_any_type() -> None:
    with pytest.raises(InvalidInput) as exc:
        validate_values(SPECS, {"name": "Ada", "since": None}, "inputs")
    assert messages(exc) == {"inputs.since": "expected date, got null"}


def test_values_that_are_not_a_mapping() -> None:
    with pytest.raises(InvalidInput) as exc:
        validate_values(SPECS, ["Ada"], "inputs")  # type: ignore[arg-type]
    assert paths(exc) == ["inputs", "inputs.name"]


@pytest.mark.parametrize(("ftype", "value"), GOOD)
def test_every_good_value_passes_validate_values(ftype: FieldType, value: Any) -> None:
    assert validate_values({"x": FieldSpec(ftype)}, {"x": value}, "inputs") == {"x": value}


@pytest.mark.parametrize(("ftype", "value", "message"), BAD)
def test_every_bad_value_fails_validate_values(ftype: FieldType, value: Any, message: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        validate_values({"x": FieldSpec(ftype)}, {"x": value}, "outputs")
    assert paths(exc) == ["outputs.x"]
    assert message in exc.value.errors[0].message


# -- parse_fields ---------------------------------------------------------------------------------


def test_short_and_long_forms() -> None:
    errors = ErrorList()
    fields = parse_fields(
        {
            "a": "date",
            "b": {"type": "integer", "default": 3, "description": "bee"},
            "c": {"type": "string", "required": False},
            "d": {"type": "boolean"},
        },
        "inputs",
        errors,
    )
    assert errors.items == []
    assert fields == {
        "a": FieldSpec(T.DATE, True, None, ""),
        "b": FieldSpec(T.INTEGER, False, 3, "bee"),
        "c": FieldSpec(T.STRING, False, None, ""),
        "d": FieldSpec(T.BOOLEAN, True, None, ""),
    }


def test_bad_fields_are_all_reported() -> None:
    errors = ErrorList()
    parse_fields(
        {
            "a": "dat",
            "b": {"type": "integer", "default": "x"},
            "c": {"type": "string", "required": "yes"},
            "d": {"type": "date", "required": True, "default": "2026-03-01"},
            "e": {"default": 1},
            "f": {"type": "string", "colour": "red", "description": 5},
            "g h": "string",
            "i": 5,
        },
        "inputs",
        errors,
    )
    assert [e.path for e in errors.items] == [
        "inputs.a.type",
        "inputs.b.default",
        "inputs.c.required",
        "inputs.d.required",
        "inputs.e.type",
        "inputs.f.colour",
        "inputs.f.description",
        "inputs.g h",
        "inputs.i",
    ]


def test_fields_must_be_a_mapping() -> None:
    errors = ErrorList()
    assert parse_fields(["a"], "outputs", errors) == {}
    assert [e.path for e in errors.items] == ["outputs"]
    assert parse_fields(None, "outputs", ErrorList()) == {}


# -- XML text -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [("10", 10), (" -3 ", -3), ("1.5", 1.5), ("1e3", 1000.0), (".5", 0.5), ("abc", "abc")],
)
def test_number_from_text(text: str, value: Any) -> None:
    converted = number_from_text(text)
    assert converted == value
    assert type(converted) is type(value)


@pytest.mark.parametrize("text", ["nan", "inf", "1_000", "\u0661\u0660", "0x10", ""])
def test_number_from_text_keeps_what_is_no_plain_number(text: str) -> None:
    assert number_from_text(text) == text


@pytest.mark.parametrize(
    ("text", "value"),
    [("true", True), ("TRUE", True), ("1", True), ("false", False), ("0", False), ("yes", "yes")],
)
def test_bool_from_text(text: str, value: Any) -> None:
    assert bool_from_text(text) == value


@pytest.mark.parametrize(
    ("type_name", "text", "value"),
    [
        ("integer", "10", 10),
        ("number", "2.5", 2.5),
        ("boolean", "false", False),
        ("object", '{"a": [1]}', {"a": [1]}),
        ("array", "[1, 2]", [1, 2]),
        ("array", "[1,", "[1,"),
        ("string", "10", "10"),
        ("date", "2026-03-01", "2026-03-01"),
        (None, "10", "10"),
    ],
)
def test_value_from_text_converts_by_declared_type(type_name: Any, text: str, value: Any) -> None:
    assert value_from_text(type_name, text) == value
