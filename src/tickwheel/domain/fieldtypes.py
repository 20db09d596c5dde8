"""The fields of a Definition's inputs and outputs, and the checking of values against them.

A field is declared in short form (``report_date: date``: required, no default) or in long form
(``{type, required, default, description}``; ``required`` is true unless a default is given).
Values are JSON values. Checking never converts them (a date stays a string): it says what is
wrong with each field, by its dotted path, so that one error names every bad field.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from tickwheel.domain.errors import ErrorList
from tickwheel.domain.jsonvalues import VERSION_MAX, first_problem


class FieldType(StrEnum):
    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    DATE = "date"
    DATETIME = "datetime"
    URI = "uri"
    OBJECT = "object"
    ARRAY = "array"


@dataclass(frozen=True)
class FieldSpec:
    """One declared input or output. ``default`` is None when there is none (null is no default)."""

    type: FieldType
    required: bool = True
    default: Any | None = None
    description: str = ""


FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SPEC_KEYS = ("type", "required", "default", "description")
_TYPE_NAMES = frozenset(t.value for t in FieldType)

_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_TIME = r"[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
_DATETIME = re.compile(_DATE.pattern + _TIME + r"([Zz]|[+-][0-9]{2}:[0-9]{2})")
_NAIVE_DATETIME = re.compile(_DATE.pattern + _TIME)
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
_NUMBER_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def json_type_name(value: Any) -> str:
    """The JSON name of a value's type, as used in messages ("expected integer, got string")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def describe(value: Any) -> str:
    """A value's type, and the value itself when it is short and scalar: ``string "1"``."""
    name = json_type_name(value)
    if isinstance(value, str | int | float | bool):
        text = json.dumps(value)
        return f"{name} {text}" if len(text) <= 60 else f"{name} {text[:57]}..."
    return name


def quote(value: Any) -> str:
    """A value as written in a document: strings quoted, other values described."""
    return json.dumps(value) if isinstance(value, str) else describe(value)


def value_problem(ftype: FieldType, value: Any) -> str | None:
    """What is wrong with ``value`` as a ``ftype``, or None when it fits."""
    got = json_type_name(value)
    if ftype is FieldType.NUMBER:
        if got not in ("integer", "number"):
            return f"expected number, got {got}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"expected a finite number, got {value}"
        return first_problem(value)
    if ftype in _TEXT_CHECKS:
        if not isinstance(value, str):
            return f"expected {ftype}, got {got}"
        check, hint = _TEXT_CHECKS[ftype]
        if check(value):
            return first_problem(value)
        if ftype is FieldType.DATETIME and _NAIVE_DATETIME.fullmatch(value):
            return f"expected datetime with a UTC offset or Z, got naive {describe(value)}"
        return f"expected {ftype} ({hint}), got {describe(value)}"
    if got != ftype.value:
        return f"expected {ftype}, got {got}"
    # Strings, integers, objects and arrays: what every stored JSON value must be.
    problem = first_problem(value)
    if problem is not None and ftype in (FieldType.OBJECT, FieldType.ARRAY):
        return f"expected {ftype} of JSON values: {problem}"
    return problem


def _is_date(text: str) -> bool:
    if not _DATE.fullmatch(text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _is_datetime(text: str) -> bool:
    if not _DATETIME.fullmatch(text):
        return False
    try:
        datetime.fromisoformat(text.upper().replace(" ", "T"))
    except ValueError:
        return False
    return True


def _is_uri(text: str) -> bool:
    if not text or any(c.isspace() for c in text):
        return False
    try:
        parts = urlsplit(text)
    except ValueError:
        return False
    return bool(parts.scheme) and bool(parts.netloc or parts.path)


_TEXT_CHECKS: dict[FieldType, tuple[Callable[[str], bool], str]] = {
    FieldType.DATE: (_is_date, "ISO YYYY-MM-DD"),
    FieldType.DATETIME: (_is_datetime, "RFC 3339 with an offset or Z, e.g. 2026-03-01T09:30:00Z"),
    FieldType.URI: (_is_uri, "a URI with a scheme, e.g. https://example.com/x"),
}


def validate_values(
    specs: Mapping[str, FieldSpec],
    values: Mapping[str, Any] | None,
    prefix: str,
    context: str | None = None,
) -> dict[str, Any]:
    """Check ``values`` against ``specs``; return them with defaults applied.

    Raises InvalidInput naming each bad field as ``prefix.name``: a missing required field, a
    name the definition does not declare, a value of the wrong type. ``context`` (such as
    ``registry://jobs/x version 2``) ends the message.
    """
    errors = ErrorList()
    given: Mapping[str, Any] = {} if values is None else values
    if not isinstance(given, Mapping):
        errors.add(prefix, f"expected object, got {json_type_name(given)}")
        given = {}
    result: dict[str, Any] = {}
    for name, spec in specs.items():
        path = f"{prefix}.{name}"
        if name in given:
            problem = value_problem(spec.type, given[name])
            if problem is None:
                result[name] = given[name]
            else:
                errors.add(path, problem)
        elif spec.default is not None:
            result[name] = copy.deepcopy(spec.default)
        elif spec.required:
            errors.add(path, f"is required ({spec.type}) but missing")
    for name in given:
        if name not in specs:
            errors.add(f"{prefix}.{name}", "not declared by the definition")
    errors.raise_if_any(
        f"{prefix} do not match the definition" + (f" {context}" if context else "")
    )
    return result


def parse_fields(raw: Any, path: str, errors: ErrorList) -> dict[str, FieldSpec]:
    """Read the ``inputs`` or ``outputs`` of a document; add an error for each bad field."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        errors.add(path, f"must be a mapping of field name to type, got {json_type_name(raw)}")
        return {}
    fields: dict[str, FieldSpec] = {}
    for name, decl in raw.items():
        field_path = f"{path}.{name}"
        if not isinstance(name, str) or not FIELD_NAME.fullmatch(name):
            errors.add(
                field_path,
                f"field names must match ^{FIELD_NAME.pattern}$: a letter or '_', "
                "then letters, digits or '_'",
            )
            continue
        spec = _parse_field(decl, field_path, errors)
        if spec is not None:
            fields[name] = spec
    return fields


def _parse_field(decl: Any, path: str, errors: ErrorList) -> FieldSpec | None:
    if isinstance(decl, str):
        ftype = _field_type(decl, f"{path}.type", errors)
        return None if ftype is None else FieldSpec(ftype)
    if not isinstance(decl, Mapping):
        errors.add(path, f"must be a type name or a mapping with keys {', '.join(SPEC_KEYS)}")
        return None
    before = len(errors.items)
    check_keys(decl, SPEC_KEYS, path, errors)
    ftype = _field_type(decl.get("type"), f"{path}.type", errors)
    description = decl.get("description")
    if description is None:
        description = ""
    elif not isinstance(description, str):
        errors.add(f"{path}.description", f"must be a string, got {describe(description)}")
    default = decl.get("default")
    required = decl.get("required")
    if required is None:
        required = default is None
    elif not isinstance(required, bool):
        errors.add(f"{path}.required", f"must be true or false, got {describe(required)}")
    elif required and default is not None:
        errors.add(
            f"{path}.required",
            "a field with a default is not required: set required to false or drop the default",
        )
    if default is not None and ftype is not None:
        problem = value_problem(ftype, default)
        if problem is not None:
            errors.add(f"{path}.default", problem)
    if ftype is None or len(errors.items) > before:
        return None
    return FieldSpec(ftype, required, default, description)


def _field_type(value: Any, path: str, errors: ErrorList) -> FieldType | None:
    allowed = ", ".join(t.value for t in FieldType)
    if value is None:
        errors.add(path, f"is required: one of {allowed}")
        return None
    if isinstance(value, str) and value in _TYPE_NAMES:
        return FieldType(value)
    errors.add(path, f"unknown type {quote(value)}; allowed: {allowed}")
    return None


def field_to_document(spec: FieldSpec) -> dict[str, Any]:
    """The long form of a field, with every key present."""
    return {
        "type": spec.type.value,
        "required": spec.required,
        "default": copy.deepcopy(spec.default),
        "description": spec.description,
    }


def number_from_text(text: str) -> int | float | str:
    """XML text as a number (int when it has no fraction); other text comes back as is."""
    stripped = text.strip()
    if _INTEGER_TEXT.fullmatch(stripped):
        return int(stripped)
    if _NUMBER_TEXT.fullmatch(stripped):
        return float(stripped)
    return text


def bool_from_text(text: str) -> bool | str:
    """XML text as a boolean (true/false/1/0); anything else comes back as is."""
    lowered = text.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    return text


def value_from_text(type_name: Any, text: str) -> Any:
    """An XML default as the JSON value its declared type holds (JSON text for object and array).

    Text that does not convert comes back as is, so that checking reports it with its path.
    """
    if type_name in ("integer", "number"):
        return number_from_text(text)
    if type_name == "boolean":
        return bool_from_text(text)
    if type_name in ("object", "array"):
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            return text
    return text


# -- readers of document values: each adds an error with its path and returns None when wrong ----


def join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def check_keys(
    raw: Mapping[Any, Any], allowed: Sequence[str], path: str, errors: ErrorList
) -> None:
    for key in raw:
        if key not in allowed:
            errors.add(join(path, key), f"unknown key {key!r}; allowed keys: {', '.join(allowed)}")


def read_str(value: Any, path: str, errors: ErrorList) -> str | None:
    if value is None:
        errors.add(path, "is required")
    elif not isinstance(value, str):
        errors.add(path, f"must be a string, got {describe(value)}")
    else:
        return value
    return None


def read_positive_int(value: Any, path: str, errors: ErrorList, default: int | None) -> int | None:
    if value is None:
        if default is None:
            errors.add(path, "is required")
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        errors.add(path, f"must be an integer, got {describe(value)}")
    elif value < 1:
        errors.add(path, f"must be at least 1, got {value}")
    elif value > VERSION_MAX:
        errors.add(path, f"must be at most {VERSION_MAX}, got {value}")
    else:
        return value
    return None


def read_seconds(value: Any, path: str, errors: ErrorList, default: float) -> float | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        errors.add(path, f"must be a number of seconds, got {describe(value)}")
        return None
    try:
        seconds = float(value)
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds) or seconds <= 0:
        errors.add(path, f"must be a finite number of seconds above 0, got {describe(value)}")
        return None
    return seconds


def read_str_list(
    value: Any, path: str, errors: ErrorList, required: bool
) -> tuple[str, ...] | None:
    """A list of strings such as argv; a plain string is refused: it would need a shell to split."""
    if value is None and not required:
        return ()
    if isinstance(value, str):
        errors.add(
            path, 'must be a list of strings, not a shell string: write ["python3", "-c", ...]'
        )
        return None
    if not isinstance(value, list | tuple) or (required and not value):
        errors.add(path, "must be a non-empty list of strings (the program, then its arguments)")
        return None
    before = len(errors.items)
    for index, item in enumerate(value):
        if not isinstance(item, str):
            errors.add(f"{path}.{index}", f"must be a string, got {describe(item)}")
    if value and value[0] == "":
        errors.add(f"{path}.0", "the program must not be empty")
    return tuple(value) if len(errors.items) == before else None
