"""The SDK's return types: the API's resource models (``tickwheel.resources``) under the names
the SDK has always used. One class is both the JSON shape and the Python object: ``info.status``,
``info.execution_id``, ``info.to_wire()`` (camelCase, as the API sends it)."""

from __future__ import annotations

from dataclasses import dataclass

from tickwheel.resources.definitions import Definition
from tickwheel.resources.executions import Attempt as AttemptInfo
from tickwheel.resources.executions import BatchItemResult, ExecutionPage, SubmitReceipt
from tickwheel.resources.executions import Execution as ExecutionInfo

__all__ = [
    "AttemptInfo",
    "BatchItemResult",
    "Definition",
    "DefinitionApplied",
    "ExecutionInfo",
    "ExecutionPage",
    "SubmitReceipt",
]


@dataclass(frozen=True)
class DefinitionApplied:
    """A registration: the stored version, and whether this call created it (False: the same
    content was registered already)."""

    definition: Definition
    created: bool
