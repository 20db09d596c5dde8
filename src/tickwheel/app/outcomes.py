"""What a write did, as a value: the transports and the API map it to a status code (201, 200,
409, 422), the rules never do."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, NamedTuple, TypeVar

from tickwheel.domain.errors import TickwheelError

T = TypeVar("T")


class Outcome(StrEnum):
    CREATED = "created"
    """Stored now."""
    SAME = "same"
    """The same request (an idempotency key with the same body) or the same content (a
    definition registered again unchanged): the stored one, nothing written."""
    CONFLICT = "conflict"
    """The key or the name and version are taken by something different: nothing written."""
    INVALID = "invalid"
    """The request is wrong in itself (a field, an unknown definition): nothing written."""

    @property
    def created(self) -> bool:
        return self is Outcome.CREATED


@dataclass(frozen=True)
class Written(Generic[T]):
    """A write that succeeded: the stored thing and whether this call created it (``CREATED``)
    or found it already there (``SAME``)."""

    outcome: Outcome
    value: T

    @property
    def created(self) -> bool:
        return self.outcome.created


@dataclass(frozen=True)
class ItemOutcome(Generic[T]):
    """One item of a batch, which goes on when an item fails: ``value`` for ``CREATED`` and
    ``SAME``, ``error`` (why nothing was written) for ``CONFLICT`` and ``INVALID``."""

    outcome: Outcome
    value: T | None = None
    error: TickwheelError | None = None


class IdOutcome(NamedTuple):
    """One item of a batch answered by its id alone (``ExecutionService.submit_many_ids``):
    ``ItemOutcome``'s outcome and error, the execution's id instead of the execution. A tuple:
    one object per item, where an ``ItemOutcome`` and its execution were four."""

    outcome: Outcome
    execution_id: uuid.UUID | None
    error: TickwheelError | None
