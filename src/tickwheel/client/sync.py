"""The blocking Python SDK: ``Client`` runs an ``AsyncClient`` (``client.py``, where the logic
is) on a private event loop thread, one blocking method for each of its coroutines."""

from __future__ import annotations

import asyncio
import builtins
import threading
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import Future
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from tickwheel.client.caller_tx import Pending, PendingBatch
from tickwheel.client.client import AsyncClient
from tickwheel.client.cron_sync import CronSync
from tickwheel.client.models import (
    AttemptInfo,
    BatchItemResult,
    DefinitionApplied,
    ExecutionInfo,
    ExecutionPage,
)
from tickwheel.client.requests import ConcurrencyArg, ExecutionRef, submit_request, with_uris
from tickwheel.client.webhooks import WebhooksSync
from tickwheel.client.workflows import WorkflowsSync
from tickwheel.domain.states import ExecutionStatus
from tickwheel.domain.submission import SubmitRequest

T = TypeVar("T")


class Client:
    """Blocking facade: runs an ``AsyncClient`` on a private event loop thread, so it works in
    scripts and inside frameworks that already run a loop of their own. Like ``AsyncClient``,
    ``Client()`` reads ``TICKWHEEL_URL`` and ``TICKWHEEL_API_KEY`` for what it is not given."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 10.0,
        make_async: Callable[[], Coroutine[Any, Any, AsyncClient]] | None = None,
    ) -> None:
        """``make_async`` builds the AsyncClient it wraps, on its loop thread (what
        ``tickwheel.connect`` uses to open the store there); by default one over HTTP."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        factory = make_async or (lambda: _make_async(url, api_key, timeout))
        try:
            self._async = self._run(factory())
        except BaseException:
            self._stop_loop()
            raise
        self.cron = CronSync(self._run, self._async.cron)
        """Cron jobs (``client/cron.py``)."""
        self.workflows = WorkflowsSync(self._run, self._async.workflows)
        """Workflows and workflow runs (``client/workflows.py``)."""
        self.webhooks = WebhooksSync(self._run, self._async.webhooks)
        """Failure notifications (``client/webhooks.py``)."""

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._loop.is_running():
            self._run(self._async.close())
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def apply_definition(
        self, source: str | Path | bytes, fmt: str | None = None, shared: bool = False
    ) -> DefinitionApplied:
        return self._run(self._async.apply_definition(source, fmt, shared))

    def definitions(self) -> builtins.list[dict[str, Any]]:
        return self._run(self._async.definitions())

    def definition_versions(self, name: str) -> builtins.list[dict[str, Any]]:
        return self._run(self._async.definition_versions(name))

    def submit(
        self,
        definition: str,
        inputs: dict[str, Any] | None = None,
        execute_at: datetime | None = None,
        idempotency_key: str | None = None,
        *,
        version: int | None = None,
        priority: int = 0,
        concurrency: ConcurrencyArg = None,
        connection: Any = None,
    ) -> ExecutionInfo:
        """With ``connection`` (a client of ``tickwheel.connect``): inside the caller's open
        transaction; the insert runs on this thread, the connection's own."""
        if connection is None:
            return self._run(
                self._async.submit(
                    definition, inputs, execute_at, idempotency_key, version=version,
                    priority=priority, concurrency=concurrency,
                )
            )  # fmt: skip
        request = submit_request(
            definition,
            inputs,
            execute_at,
            idempotency_key,
            version=version,
            priority=priority,
            concurrency=concurrency,
        )
        return self._run(Pending.prepare(self._async.transport, request)).run(connection)

    def submit_after(
        self,
        delay: timedelta | float,
        definition: str,
        inputs: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        *,
        version: int | None = None,
        priority: int = 0,
        concurrency: ConcurrencyArg = None,
        connection: Any = None,
    ) -> ExecutionInfo:
        at = self.after(delay)
        return self.submit(
            definition,
            inputs,
            at,
            idempotency_key,
            version=version,
            priority=priority,
            concurrency=concurrency,
            connection=connection,
        )

    def after(self, delay: timedelta | float) -> datetime:
        """The instant ``delay`` from now on this client's clock (what ``submit_after`` uses)."""
        return self._async.after(delay)

    def submit_many(
        self, requests: Iterable[SubmitRequest], *, connection: Any = None
    ) -> builtins.list[BatchItemResult]:
        if connection is None:
            return self._run(self._async.submit_many(list(requests)))
        items = with_uris(requests)
        return self._run(PendingBatch.prepare(self._async.transport, items)).run(connection)

    def get(self, execution_id: ExecutionRef) -> ExecutionInfo:
        return self._run(self._async.get(execution_id))

    def list(
        self,
        *,
        status: Iterable[ExecutionStatus | str] = (),
        definition: str | None = None,
        idempotency_key: str | None = None,
        execute_from: datetime | None = None,
        execute_to: datetime | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> ExecutionPage:
        return self._run(
            self._async.list(
                status=status,
                definition=definition,
                idempotency_key=idempotency_key,
                execute_from=execute_from,
                execute_to=execute_to,
                cursor=cursor,
                limit=limit,
            )
        )

    def attempts(self, execution_id: ExecutionRef) -> builtins.list[AttemptInfo]:
        return self._run(self._async.attempts(execution_id))

    def output(self, execution_id: ExecutionRef) -> Any:
        return self._run(self._async.output(execution_id))

    def history(self, execution_id: ExecutionRef) -> builtins.list[dict[str, Any]]:
        return self._run(self._async.history(execution_id))

    def cancel(self, execution_id: ExecutionRef) -> ExecutionInfo:
        return self._run(self._async.cancel(execution_id))

    def replay(self, execution_id: ExecutionRef) -> ExecutionInfo:
        return self._run(self._async.replay(execution_id))

    def wait(
        self, execution_id: ExecutionRef, timeout: float = 60.0, *, poll: float = 0.2
    ) -> ExecutionInfo:
        return self._run(self._async.wait(execution_id, timeout, poll=poll))


async def _make_async(url: str | None, api_key: str | None, timeout: float) -> AsyncClient:
    """Made on the loop thread, so the HTTP connection pool belongs to that loop."""
    return AsyncClient(url, api_key, timeout=timeout)
