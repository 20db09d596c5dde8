"""The error tree. Each error subclasses the stdlib meaning so callers can catch what they know;
only ``api/errors.py`` turns them into HTTP statuses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class TickwheelError(Exception):
    """Base of every error tickwheel raises on purpose. ``code`` is stable and machine-readable."""

    code = "error"

    def __init__(self, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


@dataclass(frozen=True)
class FieldError:
    """One bad field, located by a dotted path such as ``inputs.report_date``."""

    path: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


class InvalidInput(TickwheelError, ValueError):
    """The request is well-formed but its content is wrong; ``errors`` lists each bad field."""

    code = "invalid_input"

    def __init__(self, message: str, errors: list[FieldError] | None = None) -> None:
        self.errors: list[FieldError] = list(errors or [])
        super().__init__(message, [e.as_dict() for e in self.errors] or None)


class BadRequest(TickwheelError, ValueError):
    """The request cannot be read at all (syntax, encoding, unsupported media type)."""

    code = "bad_request"


class NotFound(TickwheelError, LookupError):
    code = "not_found"


class Conflict(TickwheelError):
    """The request contradicts what is stored: a reused idempotency key, an immutable
    definition, the current state."""

    code = "conflict"


class InvalidTransition(Conflict):
    """A state change the state machine does not allow from the current status."""

    code = "invalid_transition"


class Unauthorized(TickwheelError, PermissionError):
    code = "unauthorized"


class Forbidden(TickwheelError, PermissionError):
    code = "forbidden"


class PayloadTooLarge(TickwheelError, ValueError):
    code = "payload_too_large"


class TooManyRequests(TickwheelError):
    """The caller must slow down (too many failed sign-ins); ``retry_after`` says for how long."""

    code = "too_many_requests"

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(TickwheelError, ConnectionError):
    """The database cannot be reached or the connection broke mid-request (a restart, a
    terminated session, the pool timing out). Nothing is wrong with the request: the same request
    later may well succeed, so the API answers 503 with ``Retry-After``. Whether a write that
    broke mid-commit happened is unknown; idempotency keys make the retry safe."""

    code = "unavailable"

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class ErrorList:
    """Collects field errors while validating so that one response names every bad field."""

    items: list[FieldError] = field(default_factory=list)

    def add(self, path: str, message: str) -> None:
        self.items.append(FieldError(path, message))

    def raise_if_any(self, message: str) -> None:
        if self.items:
            raise InvalidInput(message, self.items)


class PermanentError(TickwheelError):
    """Raise it from a handler to fail the execution without retries."""

    code = "permanent"
