"""domain/fast_init.py: a class whose instances are made without ``__init__`` is refused once it
gains what ``__init__`` would do beyond setting the fields, and an instance made by ``filled``
equals the one ``__init__`` makes."""

from __future__ import annotations

import dataclasses

import pytest

from tickwheel.domain.fast_init import fillable, filled


@dataclasses.dataclass(frozen=True)
class Plain:
    a: int
    b: str = "b"


def test_filled_equals_what_init_makes() -> None:
    made = filled(fillable(Plain), {"a": 1, "b": "x"})
    assert made == Plain(1, "x")
    assert vars(made) == vars(Plain(1, "x"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.a = 2  # type: ignore[misc]


def test_the_fields_given_become_the_instances_dictionary() -> None:
    fields = {"a": 1, "b": "x"}
    made = filled(Plain, fields)
    assert vars(made) is fields and made == Plain(1, "x")


def test_a_class_with_post_init_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            if self.a < 0:
                raise ValueError("negative")

    with pytest.raises(TypeError, match="Checked gained a __post_init__ or __slots__"):
        fillable(Checked)


def test_a_class_with_slots_is_refused() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    with pytest.raises(TypeError, match="Slotted"):
        fillable(Slotted)
