"""Types for request fields and parameters that pydantic's defaults make too lenient.

Left to itself pydantic takes a number (or a string of digits) as a datetime in Unix seconds, and
any integer however large; a version of 2**70 then overflows the database's bigint and answers
500. These types keep what reaches the core inside what the core and the stores can hold."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field, StrictInt, StrictStr

from tickwheel.domain.jsonvalues import (
    INT64_MAX,
    INT64_MIN,
    VERSION_MAX,
    problems,
    text_problem,
)
from tickwheel.resources.fields import Rfc3339 as Rfc3339  # the submit body's, shared

Int64 = Annotated[StrictInt, Field(ge=INT64_MIN, le=INT64_MAX)]
"""Any integer a signed 64-bit column holds (a JSON number with no fraction, not a string)."""

Version = Annotated[int, Field(ge=1, le=VERSION_MAX)]
"""A definition, workflow or cron job version in a path or a query string."""

StrictVersion = Annotated[StrictInt, Field(ge=1, le=VERSION_MAX)]
"""A version in a JSON body: a whole number, not ``"1"`` and not ``1.0``."""


def _text(value: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


Text = Annotated[StrictStr, AfterValidator(_text)]
"""A string that can be stored: no NUL, no lone surrogate."""


def _json_object(value: dict[str, Any]) -> dict[str, Any]:
    found = problems(value, "")
    if found:
        where, message = found[0]
        raise ValueError(f"{where.lstrip('.')}: {message}" if where else message)
    return value


JsonObject = Annotated[dict[str, Any], AfterValidator(_json_object)]
"""A JSON object that can be stored whole (see ``domain.jsonvalues``)."""
