"""The one interface of both transports. It speaks the API's wire format (JSON-able dicts), so
the in-process transport is the API without HTTP and the HTTP transport is a thin mapping.

Neither transport is imported here: the in-process one brings the application layer and the
store protocols, the HTTP one httpx. A client over HTTP (the CLI) never loads the first, one in
the server's process never needs the second. Code that only asks whether a transport is of one
kind looks for its module in ``sys.modules`` (``is_in_process``, ``is_http``): a class whose
module was never imported has no instances."""

from __future__ import annotations

import builtins
import sys
import uuid
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

if TYPE_CHECKING:
    from tickwheel.client.transports.http import HttpTransport
    from tickwheel.client.transports.inprocess import InProcessTransport
    from tickwheel.domain.models import ExecutionFilter
    from tickwheel.domain.submission import SubmitRequest
    from tickwheel.resources.executions import SubmitReceipt

Wire = dict[str, Any]

_IN_PROCESS = "tickwheel.client.transports.inprocess"
_HTTP = "tickwheel.client.transports.http"


def is_in_process(transport: object) -> TypeGuard[InProcessTransport]:
    """``isinstance(transport, InProcessTransport)``, without importing it when nobody has."""
    module = sys.modules.get(_IN_PROCESS)
    return module is not None and isinstance(transport, module.InProcessTransport)


def is_http(transport: object) -> TypeGuard[HttpTransport]:
    """``isinstance(transport, HttpTransport)``, without importing httpx when nobody has."""
    module = sys.modules.get(_HTTP)
    return module is not None and isinstance(transport, module.HttpTransport)


class Transport(Protocol):
    async def close(self) -> None: ...

    async def definition_apply(
        self, body: bytes, fmt: str, shared: bool = False
    ) -> tuple[Wire, bool]:
        """Registers a definition file's content into the caller's tenant, or with ``shared``
        into the shared registry (operator scope); True when it was new."""
        ...

    async def definition_list(self) -> builtins.list[Wire]: ...

    async def definition_versions(self, name: str) -> builtins.list[Wire]: ...

    async def definition_get(self, name: str, version: int) -> Wire: ...

    async def submit(self, request: SubmitRequest) -> tuple[Wire, bool]:
        """The execution and whether this call created it (False: same key, same request)."""
        ...

    async def submit_many(self, requests: builtins.list[SubmitRequest]) -> builtins.list[Wire]:
        """Per-item results ``{"status": 201|200|409|422, "execution"?: ..., "error"?: ...}``."""
        ...

    async def submit_many_receipts(
        self, requests: builtins.list[SubmitRequest]
    ) -> builtins.list[SubmitReceipt]:
        """``submit_many``'s outcomes as receipts: the status, the execution's id (201 and 200)
        or the error (409 and 422) of each item, in order."""
        ...

    async def get(self, execution_id: uuid.UUID) -> Wire: ...

    async def list(self, flt: ExecutionFilter, cursor: str | None, limit: int) -> Wire: ...

    async def attempts(self, execution_id: uuid.UUID) -> builtins.list[Wire]: ...

    async def output(self, execution_id: uuid.UUID) -> Wire:
        """``{"output", "outputReference"}``: the whole output, also when kept by reference."""
        ...

    async def history(self, execution_id: uuid.UUID) -> builtins.list[Wire]: ...

    async def cancel(self, execution_id: uuid.UUID) -> Wire: ...

    async def replay(self, execution_id: uuid.UUID) -> Wire: ...
