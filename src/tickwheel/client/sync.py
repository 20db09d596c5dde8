"""The blocking Python SDK: ``Client`` runs an ``AsyncClient`` (``client.py``, where the logic
is) on a private event loop thread, one blocking method for each of its coroutines, made from it
(``blocking.py``). Only the submissions are written out here: with ``connection=`` their insert
runs on the caller's thread, which owns the connection, not on the loop's."""

from __future__ import annotations

import asyncio
import builtins
import threading
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import Future
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Unpack, overload

from tickwheel.client.blocking import Facade, blocking
from tickwheel.client.client import Answer, AsyncClient, wants_ids
from tickwheel.client.models import BatchItemResult, ExecutionInfo, SubmitReceipt
from tickwheel.client.requests import submit_request, with_uris

if TYPE_CHECKING:
    # On first use, as ``AsyncClient``'s sub-clients and its submissions on a caller's
    # connection (``client/client.py``).
    from tickwheel.client.cron_sync import CronSync
    from tickwheel.client.flow import FlowSync
    from tickwheel.client.webhooks import WebhooksSync
    from tickwheel.client.workflows import WorkflowsSync
    from tickwheel.domain.submission import SubmitOptions, SubmitRequest

T = TypeVar("T")


class Client(Facade):
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
        super().__init__(self._run, self._async)

    # The sub-clients, each made (and its module imported) on first use.

    @cached_property
    def cron(self) -> CronSync:
        """Cron jobs (``client/cron.py``)."""
        from tickwheel.client.cron_sync import CronSync

        return CronSync(self._run, self._async.cron)

    @cached_property
    def workflows(self) -> WorkflowsSync:
        """Workflows and workflow runs (``client/workflows.py``)."""
        from tickwheel.client.workflows import WorkflowsSync

        return WorkflowsSync(self._run, self._async.workflows)

    @cached_property
    def webhooks(self) -> WebhooksSync:
        """Failure notifications (``client/webhooks.py``)."""
        from tickwheel.client.webhooks import WebhooksSync

        return WebhooksSync(self._run, self._async.webhooks)

    @cached_property
    def flow(self) -> FlowSync:
        """Pauses and circuit breakers (``client/flow.py``)."""
        from tickwheel.client.flow import FlowSync

        return FlowSync(self._run, self._async.flow)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        # The call runs in a copy of the caller's context (``call_soon_threadsafe`` copies it,
        # and the task runs in it): the caller's current span is its parent (docs/tracing.md).
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

    apply_definition = blocking(AsyncClient.apply_definition)
    definitions = blocking(AsyncClient.definitions)
    definition_versions = blocking(AsyncClient.definition_versions)

    def submit(
        self,
        definition: str,
        inputs: dict[str, Any] | None = None,
        execute_at: datetime | None = None,
        idempotency_key: str | None = None,
        *,
        connection: Any = None,
        **options: Unpack[SubmitOptions],
    ) -> ExecutionInfo:
        """``AsyncClient.submit``'s. With ``connection`` (a client of ``tickwheel.connect``):
        inside the caller's open transaction; the insert runs on this thread, the connection's
        own."""
        if connection is None:
            coro = self._async.submit(definition, inputs, execute_at, idempotency_key, **options)
            return self._run(coro)
        from tickwheel.client.caller_tx import Pending

        request = submit_request(definition, inputs, execute_at, idempotency_key, **options)
        return self._run(Pending.prepare(self._async.transport, request)).run(connection)

    def submit_after(
        self,
        delay: timedelta | float,
        definition: str,
        inputs: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        *,
        connection: Any = None,
        **options: Unpack[SubmitOptions],
    ) -> ExecutionInfo:
        at = self.after(delay)
        return self.submit(
            definition, inputs, at, idempotency_key, connection=connection, **options
        )

    def after(self, delay: timedelta | float) -> datetime:
        """The instant ``delay`` from now on this client's clock (what ``submit_after`` uses)."""
        return self._async.after(delay)

    @overload
    def submit_many(
        self,
        requests: Iterable[SubmitRequest],
        *,
        connection: Any = None,
        answer: Literal["full"] = "full",
    ) -> builtins.list[BatchItemResult]: ...

    @overload
    def submit_many(
        self, requests: Iterable[SubmitRequest], *, connection: Any = None, answer: Literal["ids"]
    ) -> builtins.list[SubmitReceipt]: ...

    def submit_many(
        self, requests: Iterable[SubmitRequest], *, connection: Any = None, answer: Answer = "full"
    ) -> builtins.list[BatchItemResult] | builtins.list[SubmitReceipt]:
        """``AsyncClient.submit_many``'s, ``answer`` included."""
        ids = wants_ids(answer)
        if connection is None:
            if ids:
                return self._run(self._async.submit_many(list(requests), answer="ids"))
            return self._run(self._async.submit_many(list(requests)))
        from tickwheel.client.caller_tx import PendingBatch

        items = with_uris(requests)
        results = self._run(PendingBatch.prepare(self._async.transport, items)).run(connection)
        return [r.receipt() for r in results] if ids else results

    get = blocking(AsyncClient.get)
    list = blocking(AsyncClient.list)
    attempts = blocking(AsyncClient.attempts)
    output = blocking(AsyncClient.output)
    history = blocking(AsyncClient.history)
    cancel = blocking(AsyncClient.cancel)
    replay = blocking(AsyncClient.replay)
    wait = blocking(AsyncClient.wait)


async def _make_async(url: str | None, api_key: str | None, timeout: float) -> AsyncClient:
    """Made on the loop thread, so the HTTP connection pool belongs to that loop."""
    return AsyncClient(url, api_key, timeout=timeout)
