"""Field types of request bodies that the API reads and the SDK writes."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AwareDatetime, BeforeValidator

from tickwheel.domain.fieldtypes import FieldType, value_problem


def _rfc3339_only(value: Any) -> Any:
    if isinstance(value, str) and value_problem(FieldType.DATETIME, value) is None:
        return value
    raise ValueError(
        "must be an RFC 3339 date-time string with an offset, e.g. 2026-01-01T09:00:00Z "
        "(numbers are not read as Unix time)"
    )


Rfc3339 = Annotated[AwareDatetime, BeforeValidator(_rfc3339_only)]
"""An instant written as RFC 3339 text with an offset: ``2026-03-01T09:30:00+01:00``. Left to
itself pydantic would take a number (or a string of digits) as Unix seconds."""
