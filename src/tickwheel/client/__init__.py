"""The Client SDK: one interface, HTTP and in-process transports."""

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
