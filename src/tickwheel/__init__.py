"""tickwheel: a distributed, time-based job scheduler. What is importable from here is the public
surface; everything else may change between releases."""

from tickwheel.client.client import AsyncClient
from tickwheel.client.cron import CronJobInfo, FireTime, OccurrenceInfo
from tickwheel.client.models import AttemptInfo, BatchItemResult, ExecutionInfo, ExecutionPage
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
    "SubmitRequest",
    "TickwheelError",
    "Unauthorized",
    "__version__",
    "connect",
    "connect_async",
]
