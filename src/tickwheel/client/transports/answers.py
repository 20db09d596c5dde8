"""The HTTP transport reads every answer into its resource model (``tickwheel.resources``)
before handing it on: an answer of another shape (a proxy's page, a server of another version
that lacks a field) fails here, with the field named, instead of as a ``KeyError`` deep in the
SDK. The transport's interface stays the API's JSON (``Wire``), which the model has checked."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from tickwheel.domain.errors import TickwheelError
from tickwheel.resources.base import Resource

Wire = dict[str, Any]


class ServerError(TickwheelError):
    code = "server_error"


def checked(model: type[Resource], body: Any, what: str) -> Wire:
    """``body``, once ``model`` has read it; ``ServerError`` saying what is wrong otherwise."""
    try:
        model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise ServerError(
            f"the server's answer to {what} does not match {model.__name__}: "
            f"{where}: {first['msg']}",
            {"errors": exc.error_count()},
        ) from exc
    result: Wire = body
    return result
