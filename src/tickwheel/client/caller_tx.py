"""Transactional submission for the SDK: ``submit(..., connection=conn)`` stores the execution
inside the caller's open transaction on their own connection, so it exists exactly when that
transaction commits (and the schedulers hear of it only then).

Only a client connected to the database (``tickwheel.connect``) can do it: the checks, the
definition it pins and the idempotency rules are the in-process transport's, as for any submit;
only the insert runs on the caller's connection (``Store.execution_insert_on``). A blocking
connection is used on the caller's thread (``sqlite3`` objects refuse any other thread)."""

from __future__ import annotations

from typing import Any

from tickwheel.app.batch_preparation import PreparedBatch
from tickwheel.client.models import BatchItemResult, ExecutionInfo
from tickwheel.client.transport import Transport
from tickwheel.client.transports.inprocess import InProcessTransport, item_result
from tickwheel.domain.submission import NewExecution, SubmitRequest
from tickwheel.store.caller_protocol import CallerInsert
from tickwheel.store.protocol import InsertOutcome


def driver_connection(connection: Any) -> Any:
    """The driver's connection under a SQLAlchemy ``Session`` or ``Connection`` (recognised by
    name: SQLAlchemy is not a dependency), else ``connection`` itself. A Session's
    ``connection()`` joins (or begins) the Session's transaction, so the insert commits or
    rolls back with it."""
    if not type(connection).__module__.startswith("sqlalchemy"):
        return connection
    if hasattr(connection, "get_bind"):  # a Session: its connection in its transaction
        connection = connection.connection()
    raw = getattr(connection, "connection", None)
    driver = getattr(raw, "driver_connection", None)
    if driver is None:
        raise TypeError(
            f"cannot find the driver connection under {type(connection).__qualname__}: pass a "
            "SQLAlchemy Session or Connection, or the psycopg / sqlite3 connection itself"
        )
    return driver


def local_transport(transport: Transport) -> InProcessTransport:
    if not isinstance(transport, InProcessTransport):
        raise TypeError(
            "submit(connection=...) needs a client connected to the database "
            "(tickwheel.connect / tickwheel.connect_async), not one talking to an API server"
        )
    return transport


class Pending:
    """A checked submission waiting for its insert on the caller's connection."""

    def __init__(self, transport: InProcessTransport, item: NewExecution) -> None:
        self.transport = transport
        self.item = item
        self.insert: CallerInsert = transport.store.execution_insert_on([item])

    @classmethod
    async def prepare(cls, transport: Transport, request: SubmitRequest) -> Pending:
        local = local_transport(transport)
        return cls(local, await local.executions_service.prepare(request))

    def settle(self, outcomes: list[InsertOutcome]) -> ExecutionInfo:
        [inserted] = outcomes
        written = self.transport.executions_service.settle(self.item, inserted)
        return ExecutionInfo.of(written.value)

    def run(self, connection: Any) -> ExecutionInfo:
        """On a blocking connection, in the calling thread."""
        return self.settle(self.insert.run(driver_connection(connection)))

    async def run_async(self, connection: Any) -> ExecutionInfo:
        """On an asyncio connection, or a blocking one (used as it is, on this thread)."""
        return self.settle(await self.insert.run_async(driver_connection(connection)))


class PendingBatch:
    """A checked batch (``submit_many``) waiting for its insert on the caller's connection: the
    invalid items are already settled, the valid ones go in together."""

    def __init__(self, transport: InProcessTransport, batch: PreparedBatch) -> None:
        self.transport = transport
        self.batch = batch
        self.insert: CallerInsert = transport.store.execution_insert_on(batch.items)

    @classmethod
    async def prepare(cls, transport: Transport, requests: list[SubmitRequest]) -> PendingBatch:
        local = local_transport(transport)
        return cls(local, await local.executions_service.prepare_many(requests))

    def settle(self, outcomes: list[InsertOutcome]) -> list[BatchItemResult]:
        settled = self.transport.executions_service.settle_many(self.batch, outcomes)
        return [item_result(item) for item in settled]

    def run(self, connection: Any) -> list[BatchItemResult]:
        return self.settle(self.insert.run(driver_connection(connection)))

    async def run_async(self, connection: Any) -> list[BatchItemResult]:
        return self.settle(await self.insert.run_async(driver_connection(connection)))
