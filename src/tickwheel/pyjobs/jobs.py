"""Jobs defined in Python: ``app = tickwheel.App()``, ``@app.job(name=..., version=...)`` on a
sync or async function, then ``send_invoice.submit(order_id=...)``.

A job is an ordinary Definition (the same registry, versioning and 409 rules as a YAML file,
shown by ``tickwheel definitions get``): its inputs come from the function's type hints, its
outputs from a pydantic model or TypedDict return type, and its execution is a python target
``<module>:<function>.run`` -- ``run``, the function wrapped to rebuild typed arguments and dump a
returned model, carries the function's own module and signature, so the worker's python runner
and run policy (docs/worker_policy.md) treat it exactly as they treat the function: the module
must be one the worker may import (under its ``--path``, or listed in TICKWHEEL_PYTHON_MODULES),
and ``tickwheel worker --app module:app`` refuses to start otherwise.

Typed submission checks the arguments against the signature before anything is stored, and
registers the job's definition on the first submit of each client (an unchanged re-registration
is a no-op; a changed one under the same version is the registry's Conflict)."""

from __future__ import annotations

import functools
import inspect
import json
import os
import typing
import weakref
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, cast

from tickwheel.client.client import AsyncClient
from tickwheel.client.models import BatchItemResult, DefinitionApplied, ExecutionInfo
from tickwheel.client.sync import Client
from tickwheel.direct import connect, connect_async
from tickwheel.domain.definition_refs import versioned
from tickwheel.domain.definitions import (
    Definition,
    content_hash,
    definition_from_document,
    definition_to_document,
)
from tickwheel.domain.errors import ErrorList, NotFound
from tickwheel.domain.fieldtypes import validate_values
from tickwheel.domain.jsonvalues import problems
from tickwheel.domain.submission import SubmitOptions, SubmitRequest
from tickwheel.pyjobs.fields import Param, from_json, inputs_of, outputs_of, result_to_json, to_json
from tickwheel.resources.definitions import Definition as DefinitionResource

OPTIONS = frozenset(SubmitOptions.__annotations__) - {"version"}
"""The submission's options a job's ``submit`` takes beside its inputs (``SubmitOptions``); the
version is the job's own."""
# Keywords of ``submit`` itself: a job may not have inputs of these names.
RESERVED = frozenset({"execute_at", "idempotency_key", "connection", "delay"}) | OPTIONS


class App:
    """A set of jobs and the client they are submitted with: the one given (``client=``, or
    ``use``), else one connected to ``database_url`` (default ``TICKWHEEL_DATABASE_URL``) on
    first use, closed by ``close``."""

    def __init__(
        self,
        database_url: str | None = None,
        *,
        tenant: str = "default",
        client: Client | None = None,
        async_client: AsyncClient | None = None,
    ) -> None:
        self.database_url = database_url
        self.tenant = tenant
        self.jobs: dict[str, Job] = {}
        self._client, self._owned = client, False
        self._async_client = async_client
        # Per client object, weakly: an id() would be reused by the next client made after one
        # is collected (another database), which would then skip registering there.
        self._registered: weakref.WeakKeyDictionary[Client | AsyncClient, set[str]] = (
            weakref.WeakKeyDictionary()
        )

    def job(
        self,
        *,
        name: str,
        version: int = 1,
        retry: int | Mapping[str, Any] | None = None,
        timeout: float | timedelta = 300.0,
        description: str | None = None,
        concurrency: Mapping[str, Any] | None = None,
    ) -> Callable[[Callable[..., Any]], Job]:
        """Declares ``func`` as the job ``name`` v``version``. ``retry``: the most attempts, or
        the definition file's retry mapping (``{"maxAttempts": 5, "baseDelay": 2}``).
        ``concurrency``: the definition file's block, e.g. ``{"key": "${{ inputs.customer }}",
        "limit": 1}`` (docs/flow-control.md)."""

        def declare(func: Callable[..., Any]) -> Job:
            if name in self.jobs:
                raise ValueError(f"this app already has a job named {name!r}")
            job = Job(self, func, name, version, retry, timeout, description, concurrency)
            self.jobs[name] = job
            return job

        return declare

    # -- clients --------------------------------------------------------------------------------

    def use(self, client: Client | None) -> None:
        """Submit with ``client`` (None: back to connecting on first use)."""
        self.close()
        self._client = client

    def use_async(self, client: AsyncClient | None) -> None:
        self._async_client = client

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client, self._owned = connect(self._url(), tenant=self.tenant), True
        return self._client

    async def async_client(self) -> AsyncClient:
        if self._async_client is None:
            self._async_client = await connect_async(self._url(), tenant=self.tenant)
        return self._async_client

    def _url(self) -> str:
        url = self.database_url or os.environ.get("TICKWHEEL_DATABASE_URL")
        if not url:
            raise ValueError(
                "this App has no client: give App(database_url=...), set "
                "TICKWHEEL_DATABASE_URL, or hand it one with app.use(client)"
            )
        return url

    def close(self) -> None:
        """Closes the client this App connected itself (not one it was given)."""
        if self._owned and self._client is not None:
            self._client.close()
            self._client, self._owned = None, False

    # -- registration ---------------------------------------------------------------------------

    def register(self, client: Client | None = None) -> list[DefinitionApplied]:
        """Registers every job's definition (what ``tickwheel worker --app`` does at start)."""
        client = client or self.client
        return [self._register(job, client) for job in self.jobs.values()]

    def _register(self, job: Job, client: Client) -> DefinitionApplied:
        applied = client.apply_definition(job.document_json(), "json")
        self._registered.setdefault(client, set()).add(job.name)
        return applied

    def _ensure(self, job: Job, client: Client) -> None:
        """Registered before the first submit: looked up first (a read), written only when
        missing. A write would wait on a SQLite caller's transaction that holds the file's
        write lock: register at start (``app.register()``, or the worker's ``--app``)."""
        if job.name in self._registered.get(client, ()):
            return
        try:
            known = client.definition_versions(job.name)
        except NotFound:
            known = []
        if not any(_same(job, stored) for stored in known):
            self._register(job, client)
        self._registered.setdefault(client, set()).add(job.name)

    async def _ensure_async(self, job: Job, client: AsyncClient) -> None:
        if job.name in self._registered.get(client, ()):
            return
        try:
            known = await client.definition_versions(job.name)
        except NotFound:
            known = []
        if not any(_same(job, stored) for stored in known):
            await client.apply_definition(job.document_json(), "json")
        self._registered.setdefault(client, set()).add(job.name)


class Job:
    """One job: callable as the function itself, submitted by ``submit`` and its siblings."""

    def __init__(
        self,
        app: App,
        func: Callable[..., Any],
        name: str,
        version: int,
        retry: int | Mapping[str, Any] | None,
        timeout: float | timedelta,
        description: str | None,
        concurrency: Mapping[str, Any] | None = None,
    ) -> None:
        if "<locals>" in func.__qualname__:
            raise TypeError(
                f"job {name!r}: {func.__qualname__} is defined inside a function; a worker "
                "imports jobs by name, so define it at the top level of a module"
            )
        if any(part.startswith("_") for part in func.__qualname__.split(".")):
            raise TypeError(
                f"job {name!r}: {func.__qualname__} is private (starts with '_'); workers "
                "never import private names"
            )
        if func.__module__ == "__main__":
            raise TypeError(
                f"job {name!r}: {func.__qualname__} is defined in the script being run "
                "(__main__); a worker imports jobs by module name, so define it in a module "
                "and import that"
            )
        self.app, self.func, self.name = app, func, name
        hints = typing.get_type_hints(func)
        self.params, self.context = inputs_of(func, hints)
        if clash := RESERVED & {p.name for p in self.params}:
            raise TypeError(f"job {name!r}: inputs may not be named {', '.join(sorted(clash))}")
        self.signature = inspect.signature(func)
        self.run = _wrap(func, {p.name: p for p in self.params})
        self.entrypoint = f"{func.__module__}:{func.__qualname__}.run"
        document: dict[str, Any] = {
            "name": name,
            "version": version,
            "description": description if description is not None else _summary(func),
            "inputs": {p.name: p.document() for p in self.params},
            "outputs": outputs_of(hints.get("return")),
            "execution": {"type": "python", "entrypoint": self.entrypoint},
            "timeout": timeout.total_seconds() if isinstance(timeout, timedelta) else timeout,
            "retry": {"maxAttempts": retry} if isinstance(retry, int) else retry,
        }
        if concurrency is not None:
            document["concurrency"] = dict(concurrency)
        self.definition: Definition = definition_from_document(document)
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def document_json(self) -> str:
        return json.dumps(definition_to_document(self.definition))

    def inputs(self, **arguments: Any) -> dict[str, Any]:
        """The arguments as the execution's inputs, checked here before anything is sent: a
        missing or unknown argument is a TypeError; a value the store cannot keep (an integer
        past 64 bits, NaN, a lone surrogate, NUL) or one the hints' types refuse is the
        registry's InvalidInput. ``submit_many`` thus refuses the whole batch, where the batch
        endpoint would have stored the valid calls and answered 422 for the others."""
        if self.context is not None and self.context in arguments:
            raise TypeError(f"{self.name}: {self.context!r} is given by the worker, not passed")
        try:
            self.signature.bind(**arguments, **({self.context: None} if self.context else {}))
        except TypeError as exc:
            raise TypeError(f"{self.name}.submit(): {exc}") from None
        inputs = {k: to_json(v) for k, v in arguments.items()}
        errors = ErrorList()
        for where, message in problems(inputs, "inputs"):
            errors.add(where, message)
        errors.raise_if_any(f"{self.name}.submit(): the arguments cannot be stored")
        context = versioned(self.definition.uri, self.definition.version)
        validate_values(self.definition.inputs, inputs, "inputs", context=context)
        return inputs

    def submit(
        self,
        *,
        execute_at: datetime | None = None,
        idempotency_key: str | None = None,
        connection: Any = None,
        **arguments: Any,
    ) -> ExecutionInfo:
        """The job's inputs as keywords, beside the submission's ``OPTIONS``."""
        options, inputs = self._options(arguments)
        client = self.app.client
        self.app._ensure(self, client)
        return client.submit(
            self.name, inputs, execute_at, idempotency_key, connection=connection, **options
        )

    def _options(self, arguments: dict[str, Any]) -> tuple[SubmitOptions, dict[str, Any]]:
        """The submission's options (with the job's version) and the job's inputs."""
        given = {k: arguments.pop(k) for k in OPTIONS if k in arguments}
        options = cast("SubmitOptions", {**given, "version": self.definition.version})
        return options, self.inputs(**arguments)

    def submit_after(self, delay: timedelta | float, **options: Any) -> ExecutionInfo:
        """``submit`` with ``execute_at = now + delay``."""
        if "execute_at" in options:
            raise TypeError("submit_after takes a delay, not execute_at")
        return self.submit(execute_at=self.app.client.after(delay), **options)

    def submit_many(
        self,
        calls: Iterable[Mapping[str, Any]],
        *,
        execute_at: datetime | None = None,
        connection: Any = None,
    ) -> list[BatchItemResult]:
        """One batch, one transaction: every call's arguments are checked before any is sent."""
        requests = [
            SubmitRequest(
                definition_uri=self.definition.uri,
                inputs=self.inputs(**call),
                definition_version=self.definition.version,
                execute_at=execute_at,
            )
            for call in calls
        ]
        client = self.app.client
        self.app._ensure(self, client)
        return client.submit_many(requests, connection=connection)

    async def submit_async(
        self,
        *,
        execute_at: datetime | None = None,
        idempotency_key: str | None = None,
        connection: Any = None,
        **arguments: Any,
    ) -> ExecutionInfo:
        options, inputs = self._options(arguments)
        client = await self.app.async_client()
        await self.app._ensure_async(self, client)
        return await client.submit(
            self.name, inputs, execute_at, idempotency_key, connection=connection, **options
        )


def _wrap(func: Callable[..., Any], params: dict[str, Param]) -> Callable[..., Any]:
    """The function the worker calls: typed arguments rebuilt from JSON, a returned model
    dumped. ``functools.wraps`` gives it the function's module, name and signature."""

    def typed(kwargs: dict[str, Any]) -> dict[str, Any]:
        return {k: from_json(params[k], v) if k in params else v for k, v in kwargs.items()}

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def run_async(**kwargs: Any) -> Any:
            return result_to_json(await func(**typed(kwargs)))

        return run_async

    @functools.wraps(func)
    def run(**kwargs: Any) -> Any:
        return result_to_json(func(**typed(kwargs)))

    return run


def _same(job: Job, stored: DefinitionResource) -> bool:
    """The registered version is this job's, unchanged."""
    return stored.version == job.definition.version and stored.content_hash == content_hash(
        job.definition
    )


def _summary(func: Callable[..., Any]) -> str:
    doc = inspect.getdoc(func) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""
