"""What an API key may do: a leaf of its own, so that ``tickwheel keys create --help`` can list
the scopes without the domain's models (``domain/models.py`` re-exports it)."""

from __future__ import annotations

from enum import StrEnum


class Scope(StrEnum):
    """What an API key may do. Each scope includes the ones below it: ``operator`` is the
    cluster's (it publishes shared definitions) and is also ``admin`` of its own tenant."""

    READ = "read"
    SUBMIT = "submit"
    ADMIN = "admin"
    OPERATOR = "operator"

    def allows(self, needed: Scope) -> bool:
        order = [Scope.READ, Scope.SUBMIT, Scope.ADMIN, Scope.OPERATOR]
        return order.index(self) >= order.index(needed)
