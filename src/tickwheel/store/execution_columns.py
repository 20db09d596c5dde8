"""How the ``executions`` table's columns map to the domain's records, for both backends: read
from the fields of ``Execution`` and ``NewExecution`` and their types, so that a new column of a
plain kind (a number, text, an instant, JSON) is mapped by its field alone and neither backend's
``rows.py`` names it (docs/development.md, "Adding a field to an Execution").

A field is stored in the column of its name (``COLUMN`` lists the one exception) and converted
by its kind, which its type decides; each backend says what a kind is in its driver's terms.
``tests/store/test_execution_columns.py`` holds ``execution_insert``'s column list (both
dialects) to ``NewExecution``'s field order, which PostgreSQL's positional items follow."""

from __future__ import annotations

import dataclasses
import types
import typing
import uuid
from collections.abc import Callable
from datetime import datetime
from enum import Enum
from typing import Any

from tickwheel.domain.models import Execution
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import NewExecution

COLUMN = {"inputs": "input_snapshot"}
"""A field kept under another column name."""
SPREAD = {"concurrency": ("concurrency_key", "concurrency_limit", "concurrency_order")}
"""A field kept in several columns: mapped by each backend's ``rows.py`` (``concurrency_of``
reads it, the insert writes its columns after the others), left out of the kinds below. It is
the last field of ``NewExecution``, so PostgreSQL's positional items end with its columns."""


class Kind(Enum):
    PLAIN = "plain"
    """Text or a number, as the driver gives it."""
    ID = "id"
    INSTANT = "instant"
    OPTIONAL_INSTANT = "optional instant"
    STATUS = "status"
    OBJECT = "object"
    """A JSON object that is always there (the inputs)."""
    JSON = "json"
    """Any JSON value, or none."""


def column(field: str) -> str:
    return COLUMN.get(field, field)


def kind_of(hint: Any) -> Kind:
    """A field's kind from its type hint."""
    args = typing.get_args(hint)
    optional = type(None) in args and (typing.get_origin(hint) in (typing.Union, types.UnionType))
    inner = next((a for a in args if a is not type(None)), hint) if optional else hint
    if inner is datetime:
        return Kind.OPTIONAL_INSTANT if optional else Kind.INSTANT
    if inner is uuid.UUID:
        return Kind.ID
    if inner is ExecutionStatus:
        return Kind.STATUS
    if inner is Any or typing.get_origin(inner) is dict:
        return Kind.JSON if optional or inner is Any else Kind.OBJECT
    if inner in (int, str, float, bool):
        return Kind.PLAIN
    raise TypeError(f"no column kind for {hint!r}: say in store/execution_columns.py")


def kinds(cls: type) -> tuple[tuple[str, Kind], ...]:
    """Each field of ``cls`` with its kind, in the class's order."""
    hints = typing.get_type_hints(cls)
    return tuple(
        (f.name, kind_of(hints[f.name])) for f in dataclasses.fields(cls) if f.name not in SPREAD
    )


EXECUTION = kinds(Execution)
NEW_EXECUTION = kinds(NewExecution)

Convert = Callable[[Any], Any]


def converters(
    fields: tuple[tuple[str, Kind], ...], by_kind: dict[Kind, Convert]
) -> tuple[tuple[str, Convert | None], ...]:
    """Each field with its backend's conversion (None: taken as it is)."""
    return tuple((name, by_kind.get(kind)) for name, kind in fields)
