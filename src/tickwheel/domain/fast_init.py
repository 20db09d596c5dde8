"""Frozen dataclasses made without their ``__init__``, for the paths that make one per row or
per item (a claim's executions, a batch's items, whole rows read back).

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``: for the
33 fields of an ``Execution`` that was most of what decoding a row cost. Filling the new
instance's dictionary in one step leaves exactly what ``__init__`` leaves, as long as the class
keeps a ``__dict__`` and has no ``__post_init__``. ``fillable`` checks that once, when a module
that relies on it is imported, so a class that gains either fails at import, not silently."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")
_new = object.__new__


def fillable(cls: type[T]) -> type[T]:
    """``cls``, once it is known that its instances may be made by ``filled``."""
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
        raise TypeError(
            f"{cls.__name__} gained a __post_init__ or __slots__: make it through __init__"
        )
    return cls


def filled(cls: type[T], fields: dict[str, Any]) -> T:
    """An instance of ``cls`` (checked by ``fillable``) holding ``fields``, which must name
    every field: the callers' tests hold each to the dataclass's own ``__init__``. ``fields``
    becomes the instance's dictionary (the caller gives it up): no second dictionary made and
    filled for each row or item of a batch."""
    instance: T = _new(cls)
    _set(instance, "__dict__", fields)
    return instance


_set = object.__setattr__
