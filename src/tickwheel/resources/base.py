"""What every resource model shares: snake_case attributes for Python, camelCase on the wire,
and instants written the way the API has always written them (``Z`` for UTC).

A resource is both the API's response model (FastAPI validates the handler's answer against it
and documents it in OpenAPI) and the SDK's return type (the HTTP transport's JSON is read into
it): the JSON shape of each resource is written down once, here."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer
from pydantic.alias_generators import to_camel

from tickwheel.domain.clock import iso as iso  # the API's spelling of an instant, re-exported

Instant = datetime
"""An instant on the wire: ``2026-03-01T12:00:00Z``, an offset when it has another one.
Pydantic's own JSON form of an aware datetime is exactly ``iso``'s (``Z`` for UTC, six digits of
microseconds when there are any), and written in Rust: a page of 500 executions takes a third
of the time it took through ``iso`` (``tests/unit/test_resources.py`` holds the two equal)."""

LocalTime = Annotated[datetime, PlainSerializer(datetime.isoformat, return_type=str)]
"""A wall-clock time with its zone's offset, ``+00:00`` included (never ``Z``)."""


def _is_none(value: Any) -> bool:
    return value is None


def omitted_when_none(description: str | None = None, alias: str | None = None) -> Any:
    """A field the API leaves out, rather than sending null, when it has no value."""
    return Field(None, exclude_if=_is_none, description=description, alias=alias)


class Resource(BaseModel):
    """The base of every resource."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    @classmethod
    def from_wire(cls, wire: Any) -> Self:
        """Reads the API's JSON (camelCase keys)."""
        return cls.model_validate(wire)

    def to_wire(self) -> dict[str, Any]:
        """The API's JSON shape (camelCase, RFC 3339 instants), e.g. for ``--json``."""
        return self.model_dump(mode="json", by_alias=True)


T = TypeVar("T")
R = TypeVar("R", bound=BaseModel)


def buildable(cls: type[R]) -> type[R]:
    """``cls``, once it is known that ``built`` makes what pydantic's ``model_construct`` would:
    no private attributes, no extra fields kept, no ``model_post_init``, not a root model."""
    if (
        cls.__private_attributes__
        or cls.model_config.get("extra") == "allow"
        or cls.__pydantic_post_init__
        or cls.__pydantic_root_model__
    ):
        raise TypeError(f"{cls.__name__} cannot be built without its validator")
    return cls


def built(cls: type[R], values: dict[str, Any], fields_set: set[str]) -> R:
    """An instance of ``cls`` (checked by ``buildable``) holding ``values``: what
    ``model_validate`` gives for values already of their fields' types, when ``values`` names
    every field in the model's order and ``fields_set`` those that were given (the others hold
    their defaults). For the answers of a batch, made from the store's own records: no check of
    any value, so never for what came from outside (callers' tests hold the two equal).

    ``fields_set`` may be one set shared by the answers of one call: a frozen model never
    changes it, and ``model_copy`` copies it before adding to it."""
    model = _new(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", fields_set)
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model


_new = object.__new__
_set = object.__setattr__


class ItemList(Resource, Generic[T]):
    """A list answer, ``{"items": [...]}``: never a bare array, so fields can be added."""

    items: list[T]


class Page(Resource, Generic[T]):
    """A page of a list; ``nextCursor`` (null on the last page) asks for the next one."""

    items: list[T]
    next_cursor: str | None
