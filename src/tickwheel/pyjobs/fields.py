"""A job function's parameters and return type as a Definition's inputs and outputs, and its
values across the wire: what a type hint becomes, how a typed argument is sent (JSON) and how
the worker's JSON becomes the typed argument again.

A pydantic model is an ``object`` (sent as its JSON dump, rebuilt by ``model_validate``); a date
or datetime is sent as ISO text (the registry's ``date``/``datetime`` fields check it) and
rebuilt; ``X | None`` is X, not required. A hint with no field type is refused when the job is
defined, not when it runs."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Union

from pydantic import BaseModel

from tickwheel.domain.fieldtypes import FieldType
from tickwheel.engine.runners.base import JobContext

_SCALARS: dict[Any, FieldType] = {
    str: FieldType.STRING,
    bool: FieldType.BOOLEAN,
    int: FieldType.INTEGER,
    float: FieldType.NUMBER,
    datetime: FieldType.DATETIME,
    date: FieldType.DATE,
    dict: FieldType.OBJECT,
    list: FieldType.ARRAY,
    tuple: FieldType.ARRAY,
}


@dataclass(frozen=True)
class Param:
    """One input: its name, field type, the hint's class (to rebuild the value) and default."""

    name: str
    type: FieldType
    kind: Any
    optional: bool
    default: Any = inspect.Parameter.empty

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"type": str(self.type)}
        if self.default is not inspect.Parameter.empty and self.default is not None:
            doc["default"] = to_json(self.default)
        elif self.optional or self.default is None:
            doc["required"] = False
        return doc


def field_type(hint: Any, where: str) -> tuple[FieldType, Any, bool]:
    """The field type of ``hint``, the class that rebuilds a value, and whether None is allowed."""
    optional = False
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(args) < len(typing.get_args(hint))
        if len(args) != 1:
            raise TypeError(f"{where}: a union of several types has no field type ({hint!r})")
        hint = args[0]
        origin = typing.get_origin(hint)
    base = origin or hint
    if isinstance(base, type) and issubclass(base, BaseModel):
        return FieldType.OBJECT, base, optional
    if typing.is_typeddict(base) or base in (Mapping, dict):
        return FieldType.OBJECT, dict, optional
    if base in (Sequence, list, tuple):
        return FieldType.ARRAY, list, optional
    if base in _SCALARS:
        return _SCALARS[base], base, optional
    raise TypeError(
        f"{where}: type {hint!r} has no field type; use str, int, float, bool, date, datetime, "
        "dict, list, a TypedDict or a pydantic model"
    )


def inputs_of(func: Callable[..., Any], hints: dict[str, Any]) -> tuple[list[Param], str | None]:
    """The inputs (every parameter but the JobContext) and the JobContext parameter's name."""
    params: list[Param] = []
    context: str | None = None
    for name, p in inspect.signature(func).parameters.items():
        hint = hints.get(name, inspect.Parameter.empty)
        if hint is JobContext:
            context = name
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(f"parameter {name!r}: a job takes its inputs by name only")
        if hint is inspect.Parameter.empty:
            raise TypeError(f"parameter {name!r} needs a type hint: it declares the input")
        kind, cls, optional = field_type(hint, f"parameter {name!r}")
        params.append(Param(name, kind, cls, optional, p.default))
    return params, context


def outputs_of(hint: Any) -> dict[str, dict[str, Any]]:
    """The declared outputs: the fields of a pydantic model or TypedDict return type, none for
    ``None``. Anything else is refused: the worker refuses outputs the definition does not
    declare, so a ``dict`` return would fail every attempt."""
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        fields = {n: f.annotation for n, f in hint.model_fields.items()}
    elif typing.is_typeddict(hint):
        fields = typing.get_type_hints(hint)
    elif hint is None or hint is type(None):
        return {}
    else:
        raise TypeError(
            f"return type {hint!r} does not declare the outputs: return a pydantic model or a "
            "TypedDict (or None for no outputs)"
        )
    outputs: dict[str, dict[str, Any]] = {}
    for name, annotation in fields.items():
        kind, _, optional = field_type(annotation, f"output {name!r}")
        outputs[name] = {"type": str(kind), "required": not optional}
    return outputs


def to_json(value: Any) -> Any:
    """A typed argument as the JSON value the registry checks."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, tuple):
        return [to_json(v) for v in value]
    return value


def from_json(param: Param, value: Any) -> Any:
    """The worker's JSON value as the argument the function's hint asks for."""
    if value is None:
        return None
    if isinstance(param.kind, type) and issubclass(param.kind, BaseModel):
        return param.kind.model_validate(value)
    if param.kind is datetime and isinstance(value, str):
        return datetime.fromisoformat(value)
    if param.kind is date and isinstance(value, str):
        return date.fromisoformat(value)
    if param.kind is tuple and isinstance(value, list):
        return tuple(value)
    return value


def result_to_json(result: Any) -> Any:
    """What the function returned as outputs: a pydantic model as its dump."""
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json")
    return result
