"""The Client SDK: one interface, HTTP and in-process transports.

The names are loaded on first use (PEP 562), as ``tickwheel``'s own: every module of the SDK
imports this package first, and ``tickwheel get`` (the HTTP client and the execution's model)
would otherwise pay for the cron client (yaml, the cron domain) and whatever else is listed here.
``from tickwheel.client import Client`` works as before; type checkers read the imports under
``TYPE_CHECKING``."""

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
}

__all__ = [
    "AsyncClient",
    "AttemptInfo",
    "BatchItemResult",
    "Client",
    "CronJobInfo",
    "ExecutionInfo",
    "ExecutionPage",
    "FireTime",
    "OccurrenceInfo",
    "SubmitReceipt",
]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'tickwheel.client' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # once loaded, a plain attribute: no second look-up
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
