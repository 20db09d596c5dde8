"""The Client SDK: one interface, HTTP and in-process transports."""

from tickwheel.client.client import AsyncClient, Client
from tickwheel.client.models import AttemptInfo, BatchItemResult, ExecutionInfo, ExecutionPage

__all__ = [
    "AsyncClient",
    "AttemptInfo",
    "BatchItemResult",
    "Client",
    "ExecutionInfo",
    "ExecutionPage",
]
