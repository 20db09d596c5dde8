"""``python`` executions: import ``module:function`` and call it with the inputs as keyword
arguments.

The function gets the ``JobContext`` too when it has a parameter annotated ``JobContext`` or,
failing that, one named ``context``. Async functions run on the event loop; sync ones in a
thread pool. It returns its outputs as a dict (None means no outputs). ``PermanentError`` fails
the execution for good; ``Snooze`` (raised or returned) runs it again later, not as a failure;
any other exception is retryable ("error"). An entrypoint that cannot be
imported, or whose signature does not take the inputs, is permanent.

What may be imported is the worker's ``RunPolicy`` (docs/worker_policy.md): never the standard
library or tickwheel's internals; the operator's module prefixes, or by default only a module
whose top-level package lives under the worker's code paths (``--path``, else the working
directory) and not in site-packages. Where a module lives is looked up (``find_spec`` of the
top-level name, which imports nothing) BEFORE anything is imported: importing runs code. An
entrypoint refused by the policy is a permanent failure.

Timeouts: an async function is cancelled. A sync function cannot be: Python cannot kill a thread.
The attempt still ends as "timeout" when the limit passes, but the thread runs on to its end and
whatever it returns or raises then is ignored. Such a thread is *stuck*: it holds one thread of
the runner's own pool, and the worker counts it against its free slots, so a hung job costs one
slot instead of starving every later sync job. At shutdown the pool is abandoned, not awaited.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
import inspect
import types
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

from tickwheel.domain.definitions import Definition, PythonExecution
from tickwheel.domain.errors import PermanentError
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.domain.running import Snooze
from tickwheel.engine.runners.base import (
    JobContext,
    RunOutcome,
    failure,
    jsonable,
    returned,
    snoozed,
    traceback_tail,
)
from tickwheel.engine.runners.python_policy import callable_problem, entrypoint_problem

__all__ = ["PythonRunner", "load_entrypoint"]


class EntrypointError(Exception):
    """The entrypoint cannot be imported or called as declared: retrying will not help."""


def load_entrypoint(entrypoint: str, policy: RunPolicy | None = None) -> Callable[..., Any]:
    """The callable named by ``module:attr.attr``, if ``policy`` (by default the default one)
    allows it. Raises EntrypointError naming the entrypoint and why."""
    module_name, _, attr_path = entrypoint.partition(":")
    if not module_name or not attr_path:
        raise EntrypointError(f"entrypoint {entrypoint!r} must look like 'package.module:function'")
    policy = policy or RunPolicy()
    # Before the import: importing a module runs it.
    if problem := entrypoint_problem(entrypoint, policy):
        raise EntrypointError(f"entrypoint {entrypoint!r} is refused: {problem}")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or whatever the module raises while it loads
        raise EntrypointError(
            f"cannot import module {module_name!r} of entrypoint {entrypoint!r}:"
            f" {type(exc).__name__}: {exc}"
        ) from exc
    for name in attr_path.split("."):
        try:
            target = getattr(target, name)
        except AttributeError as exc:
            raise EntrypointError(f"entrypoint {entrypoint!r}: no attribute {name!r}") from exc
        if isinstance(target, types.ModuleType):  # ``allowed_module:os.system``
            raise EntrypointError(
                f"entrypoint {entrypoint!r} reaches into module {target.__name__!r}: name that"
                " module's function itself, if the worker allows it"
            )
    if not callable(target):
        raise EntrypointError(f"entrypoint {entrypoint!r} is not callable")
    if problem := callable_problem(entrypoint, target, policy):
        raise EntrypointError(f"entrypoint {entrypoint!r} is refused: {problem}")
    return target  # type: ignore[no-any-return]


class _CallPlan:
    """What calling one function needs, worked out once: its signature, the parameter that takes
    the JobContext and whether it is async. ``inspect`` costs more than a no-op job itself (about
    a tenth of a busy worker's time), and a function's signature does not change.

    Whether a call binds depends only on the keyword names passed, so the names seen to bind are
    remembered too (bounded: inputs are validated against the definition, so they repeat)."""

    __slots__ = ("_bound", "context_name", "is_async", "signature")

    def __init__(self, func: Callable[..., Any]) -> None:
        try:
            self.signature: inspect.Signature | None = inspect.signature(func)
        except (TypeError, ValueError):  # some builtins have no signature
            self.signature = None
        self.context_name = _context_name(self.signature)
        self.is_async = _is_async(func)
        self._bound: set[frozenset[str]] = set()

    def check(self, kwargs: dict[str, Any]) -> None:
        """Raises TypeError when the function cannot take ``kwargs``."""
        if self.signature is None:  # no signature to check against (some builtins)
            return
        names = frozenset(kwargs)
        if names in self._bound:
            return
        self.signature.bind(**kwargs)
        if len(self._bound) < 64:
            self._bound.add(names)


def _plan(func: Callable[..., Any]) -> _CallPlan:
    try:
        return _cached_plan(func)
    except TypeError:  # an unhashable callable object: nothing to cache it by
        return _CallPlan(func)


_cached_plan = functools.lru_cache(maxsize=1024)(_CallPlan)


def _context_name(signature: inspect.Signature | None) -> str | None:
    """The name of the parameter that takes the JobContext: one annotated ``JobContext`` (also
    as a string, under ``from __future__ import annotations``), else one named ``context``."""
    if signature is None:
        return None
    parameters = signature.parameters
    for name, param in parameters.items():
        annotation = param.annotation
        if annotation is JobContext or (
            isinstance(annotation, str) and annotation.rpartition(".")[2] == "JobContext"
        ):
            return name
    return "context" if "context" in parameters else None


def _is_async(func: Callable[..., Any]) -> bool:
    while isinstance(func, functools.partial):
        func = func.func
    # An object whose class defines ``async def __call__`` is async too.
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)


class PythonRunner:
    """Runs ``python`` executions in this process. Sync functions run on ``executor``, by default
    a pool of its own with ``max_threads`` threads (never the loop's default executor, which
    ``asyncio.run`` waits for at exit: a hung job would keep the process alive forever)."""

    def __init__(
        self,
        executor: Executor | None = None,
        *,
        max_threads: int = 32,
        policy: RunPolicy | None = None,
    ) -> None:
        self.policy = policy or RunPolicy()
        self._own = executor is None
        self._executor: Executor = executor or ThreadPoolExecutor(
            max_threads, thread_name_prefix="tickwheel-job"
        )
        self._abandoned: set[Future[Any]] = set()
        self._loaded: dict[str, Callable[..., Any]] = {}

    def _load(self, entrypoint: str) -> Callable[..., Any]:
        """Load and check once: a module does not move, and the import and the policy's checks
        cost more than a no-op job. Bounded: entrypoints come from definitions, which are few."""
        func = load_entrypoint(entrypoint, self.policy)
        if len(self._loaded) < 1024:
            self._loaded[entrypoint] = func
        return func

    @property
    def stuck_threads(self) -> int:
        """Threads still running a job whose attempt already ended (timed out or cancelled)."""
        if not self._abandoned:  # read on every claim: nearly always nothing is stuck
            return 0
        self._abandoned = {f for f in self._abandoned if not f.done()}
        return len(self._abandoned)

    def close(self) -> None:
        """Stops taking jobs; queued ones are dropped, running threads are left to finish."""
        if self._own:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def run(
        self, definition: Definition, inputs: dict[str, Any], ctx: JobContext
    ) -> RunOutcome:
        execution = definition.execution
        if not isinstance(execution, PythonExecution):
            return failure("permanent", f"the python runner cannot run a {execution.type} job")
        entrypoint = execution.entrypoint
        try:
            func = self._loaded.get(entrypoint) or self._load(entrypoint)
            plan = _plan(func)
            kwargs = _arguments(plan, entrypoint, inputs, ctx)
        except EntrypointError as exc:
            return failure("permanent", str(exc), entrypoint=entrypoint)
        if execution.isolation == "process":  # a crash there fails this attempt alone
            # Imported here: multiprocessing is for isolated jobs only, not every worker's start.
            from tickwheel.engine.runners.isolated import run_isolated

            return await run_isolated(entrypoint, kwargs, self.policy)
        try:
            if plan.is_async:
                result = await func(**kwargs)
            else:
                # In a copy of this task's context: the job's log lines name its execution.
                call = functools.partial(func, **kwargs)
                future = self._executor.submit(contextvars.copy_context().run, call)
                try:
                    result = await asyncio.wrap_future(future)
                except asyncio.CancelledError:
                    # On timeout this await is cancelled; the thread is not (see the module doc).
                    if not future.cancel():
                        self._abandoned.add(future)
                    raise
                if inspect.isawaitable(result):  # a sync function that returned a coroutine
                    result = await result
        except Snooze as exc:
            return snoozed(exc)
        except PermanentError as exc:
            extra = {} if exc.details is None else {"details": jsonable(exc.details)}
            return failure(
                "permanent",
                exc.message or type(exc).__name__,
                exception=type(exc).__qualname__,
                traceback=traceback_tail(exc),
                **extra,
            )
        except (Exception, SystemExit) as exc:
            return failure(
                "error",
                f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__,
                exception=type(exc).__qualname__,
                traceback=traceback_tail(exc),
            )
        return returned(result, entrypoint)


def _arguments(
    plan: _CallPlan, entrypoint: str, inputs: dict[str, Any], ctx: JobContext
) -> dict[str, Any]:
    """The keyword arguments of the call, checked against the signature before calling so that a
    definition that does not fit its function fails for good rather than being retried."""
    kwargs = dict(inputs)
    name = plan.context_name
    if name is not None:
        if name in kwargs:
            raise EntrypointError(
                f"input {name!r} collides with the JobContext parameter of {entrypoint!r}"
            )
        kwargs[name] = ctx
    try:
        plan.check(kwargs)
    except TypeError as exc:
        raise EntrypointError(f"entrypoint {entrypoint!r} cannot take the inputs: {exc}") from exc
    return kwargs
