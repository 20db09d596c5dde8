"""tickwheel: a distributed, time-based job scheduler. What is importable from here is the public
surface; everything else may change between releases.

The names are loaded on first use (PEP 562): every ``tickwheel.*`` module imports this package
first, and a ``tickwheel worker`` that paid for the whole SDK (the HTTP client, the resource
models, the app layer) would start claiming a second later. ``from tickwheel import Client`` and
``tickwheel.Client`` work as before; type checkers read the imports under ``TYPE_CHECKING``."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tickwheel.client.client import AsyncClient
    from tickwheel.client.cron import CronJobInfo, FireTime, OccurrenceInfo
    from tickwheel.client.models import (
        AttemptInfo,
        BatchItemResult,
        ExecutionInfo,
        ExecutionPage,
        SubmitReceipt,
    )
    from tickwheel.client.sync import Client
    from tickwheel.direct import connect, connect_async
    from tickwheel.domain.errors import (
        BadRequest,
        Conflict,
        Forbidden,
        InvalidInput,
        NotFound,
        PayloadTooLarge,
        PermanentError,
        TickwheelError,
        Unauthorized,
    )
    from tickwheel.domain.running import Cancelled, Snooze
    from tickwheel.domain.submission import SubmitRequest
    from tickwheel.engine.runners.base import JobContext
    from tickwheel.pyjobs import App, Job

__version__ = "0.1.0"

# Each public name and the module it lives in (the same imports as above, for the run time).
_PUBLIC = {
    "AsyncClient": "tickwheel.client.client",
    "CronJobInfo": "tickwheel.client.cron",
    "FireTime": "tickwheel.client.cron",
    "OccurrenceInfo": "tickwheel.client.cron",
    "AttemptInfo": "tickwheel.client.models",
    "BatchItemResult": "tickwheel.client.models",
    "ExecutionInfo": "tickwheel.client.models",
    "ExecutionPage": "tickwheel.client.models",
    "SubmitReceipt": "tickwheel.client.models",
    "Client": "tickwheel.client.sync",
    "connect": "tickwheel.direct",
    "connect_async": "tickwheel.direct",
    "BadRequest": "tickwheel.domain.errors",
    "Conflict": "tickwheel.domain.errors",
    "Forbidden": "tickwheel.domain.errors",
    "InvalidInput": "tickwheel.domain.errors",
    "NotFound": "tickwheel.domain.errors",
    "PayloadTooLarge": "tickwheel.domain.errors",
    "PermanentError": "tickwheel.domain.errors",
    "TickwheelError": "tickwheel.domain.errors",
    "Unauthorized": "tickwheel.domain.errors",
    "Cancelled": "tickwheel.domain.running",
    "Snooze": "tickwheel.domain.running",
    "SubmitRequest": "tickwheel.domain.submission",
    "JobContext": "tickwheel.engine.runners.base",
    "App": "tickwheel.pyjobs",
    "Job": "tickwheel.pyjobs",
}

__all__ = [
    "App",
    "AsyncClient",
    "AttemptInfo",
    "BadRequest",
    "BatchItemResult",
    "Cancelled",
    "Client",
    "Conflict",
    "CronJobInfo",
    "ExecutionInfo",
    "ExecutionPage",
    "FireTime",
    "Forbidden",
    "InvalidInput",
    "Job",
    "JobContext",
    "NotFound",
    "OccurrenceInfo",
    "PayloadTooLarge",
    "PermanentError",
    "Snooze",
    "SubmitReceipt",
    "SubmitRequest",
    "TickwheelError",
    "Unauthorized",
    "__version__",
    "connect",
    "connect_async",
]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'tickwheel' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # once loaded, a plain attribute: no second look-up
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
