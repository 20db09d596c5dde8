"""``isolation: process`` for python jobs: each attempt runs in a child process of its own, so a
handler that kills its process (``os._exit``, a segfault in a C extension, the kernel's OOM
killer) fails that attempt alone, as a retryable error that names the exit code or signal, while
the worker and every other attempt it runs go on.

The worker never forks itself: it holds an event loop, threads and database connections that a
forked copy would inherit in an unusable state. Children come from a *forkserver*, a small,
single-threaded process started once (on first use) with this module preloaded, so that a child
costs a fork rather than an interpreter start (``spawn`` where there is no forkserver). The child
imports the entrypoint's module itself, calls the function (an async one under ``asyncio.run``)
and sends back one message over a pipe, then exits at once.

The worker waits without a thread: the event loop watches the pipe and the child's sentinel. A
child that ends without a message died, and its exit code or signal is the attempt's error. When
the attempt is cancelled (its timeout, a cancel request, shutdown) the child is killed: unlike a
thread, nothing of an isolated job runs on after its attempt ended.

What a handler gets is what it gets in process: its inputs as keyword arguments and the
``JobContext`` (both are pickled). What it returns must pickle too. The python runner checks the
entrypoint (import, allow-list, signature) in the worker before a child is started. A child
costs a fork and the import of the job's module (tens of milliseconds), so isolation is for jobs
that may crash, not for every small job. As everywhere in ``multiprocessing``, a program that
embeds a worker in its own script must guard its entry with ``if __name__ == "__main__":``: each
child imports the main module (the ``tickwheel`` command is guarded)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext, SpawnContext
from multiprocessing.process import BaseProcess
from typing import Any

from tickwheel.domain.errors import PermanentError
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.engine.runners.base import (
    RunOutcome,
    failure,
    jsonable,
    returned,
    shorten,
    traceback_tail,
)
from tickwheel.engine.runners.python_policy import callable_problem, entrypoint_problem

__all__ = ["run_isolated"]

EXIT_GRACE = 5.0
"""Seconds a child that has sent its result may take to exit before it is killed."""

Context = ForkServerContext | SpawnContext
_context: Context | None = None


def _mp_context() -> Context:
    """The forkserver (spawn where there is none), with this module preloaded in it."""
    global _context
    if _context is None:
        if "forkserver" in multiprocessing.get_all_start_methods():
            forkserver = multiprocessing.get_context("forkserver")
            forkserver.set_forkserver_preload([__name__])
            _context = forkserver
        else:
            _context = multiprocessing.get_context("spawn")
    return _context


async def run_isolated(
    entrypoint: str, kwargs: dict[str, Any], policy: RunPolicy | None = None
) -> RunOutcome:
    """Calls ``entrypoint`` with ``kwargs`` in a child process and returns how it ended. Only
    cancellation propagates, after the child was killed. The child checks the entrypoint against
    ``policy`` again: it resolves the name on its own ``sys.path``, which the worker's check did
    not see."""
    receive, send = _mp_context().Pipe(duplex=False)
    child = _mp_context().Process(
        target=_child_main,
        args=(send, entrypoint, kwargs, policy or RunPolicy()),
        name=f"tickwheel-isolated-{entrypoint}",
    )
    try:
        child.start()
    except Exception as exc:  # no process could be made (process limits, memory, ...)
        receive.close()
        return failure(
            "error",
            f"could not start a process for the job: {type(exc).__name__}: {exc}",
            isolation="process",
        )
    finally:
        send.close()  # the child's end: EOF here once the child is gone
    message: dict[str, Any] | None = None
    try:
        message = await _result(receive, child)
    except BaseException:
        child.kill()
        raise
    finally:
        receive.close()
        code = await _reaped(child)
    if message is None:
        return _died(code)
    return _outcome(message, entrypoint)


async def _result(receive: Connection, child: BaseProcess) -> dict[str, Any] | None:
    """The child's message, or None when it ended without one (it died)."""
    await _readable(receive.fileno(), child.sentinel)
    if not receive.poll():
        return None
    try:
        message: dict[str, Any] = receive.recv()
    except (EOFError, OSError):  # it died while sending
        return None
    return message


async def _readable(*fds: int, timeout: float | None = None) -> bool:
    """Waits until one of ``fds`` is readable (True) or ``timeout`` passes (False)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    for fd in fds:
        loop.add_reader(fd, wake)
    try:
        await asyncio.wait_for(ready, timeout)
    except TimeoutError:
        return False
    finally:
        for fd in fds:
            loop.remove_reader(fd)
    return True


async def _reaped(child: BaseProcess) -> int | None:
    """Waits for the child to exit (killing it after ``EXIT_GRACE``), collects it so that no
    zombie is left behind, and returns its exit code. Cancelled meanwhile, it kills the child
    and still collects it (the reader is removed before the sentinel is closed)."""
    try:
        if not await _readable(child.sentinel, timeout=EXIT_GRACE):
            child.kill()
    except asyncio.CancelledError:
        child.kill()
        raise
    finally:
        child.join(1.0)  # after SIGKILL or a seen exit this returns at once
        code = child.exitcode
        if code is not None:
            child.close()
    return code


def _died(code: int | None) -> RunOutcome:
    """The failure of a child that ended without a result."""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return failure(
            "error",
            f"the job's process was killed by {name} before it returned (isolation: process)",
            signal=name,
            isolation="process",
        )
    return failure(
        "error",
        f"the job's process exited with code {code} before it returned (isolation: process)",
        exitCode=code,
        isolation="process",
    )


def _outcome(message: dict[str, Any], entrypoint: str) -> RunOutcome:
    if message.get("ok"):
        return returned(message.get("output"), entrypoint)
    return failure(str(message["kind"]), str(message["message"]), **(message.get("detail") or {}))


# -- in the child ---------------------------------------------------------------------------------


def _child_main(
    send: Connection, entrypoint: str, kwargs: dict[str, Any], policy: RunPolicy
) -> None:
    """The child's whole life: call, send one message, exit at once (threads the job left
    behind must not keep it alive)."""
    message = _call(entrypoint, kwargs, policy)
    try:
        send.send(message)
    except Exception as exc:  # the output does not pickle
        send.send(
            {
                "ok": False,
                "kind": "invalid_output",
                "message": f"the job's output cannot be sent back: {type(exc).__name__}: {exc}",
            }
        )
    send.close()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


def _call(entrypoint: str, kwargs: dict[str, Any], policy: RunPolicy) -> dict[str, Any]:
    try:
        func = _resolve(entrypoint, policy)
    except Exception as exc:
        message = f"cannot load entrypoint {entrypoint!r}: {type(exc).__name__}: {exc}"
        return {"ok": False, "kind": "permanent", "message": message}
    try:
        result = func(**kwargs)
        if inspect.isawaitable(result):
            result = asyncio.run(_awaited(result))
    except PermanentError as exc:
        detail: dict[str, Any] = {
            "exception": type(exc).__qualname__,
            "traceback": traceback_tail(exc),
        }
        if exc.details is not None:
            detail["details"] = jsonable(exc.details)
        return _failed("permanent", exc.message or type(exc).__name__, detail)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the job failed
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        detail = {"exception": type(exc).__qualname__, "traceback": traceback_tail(exc)}
        return _failed("error", text, detail)
    return {"ok": True, "output": result}


def _failed(kind: str, message: str, detail: dict[str, Any]) -> dict[str, Any]:
    return {"ok": False, "kind": kind, "message": shorten(message), "detail": detail}


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _resolve(entrypoint: str, policy: RunPolicy) -> Callable[..., Any]:
    """The callable named ``module:attr.attr``. The worker checked it already (the python
    runner's load_entrypoint); the child checks again before and after its own import, because
    what a name resolves to depends on the process that imports it."""
    module_name, _, attr_path = entrypoint.partition(":")
    if problem := entrypoint_problem(entrypoint, policy):
        raise PermissionError(f"refused by the worker's run policy: {problem}")
    target: Any = importlib.import_module(module_name)
    for name in attr_path.split("."):
        target = getattr(target, name)
    if problem := callable_problem(entrypoint, target, policy):
        raise PermissionError(f"refused by the worker's run policy: {problem}")
    if not callable(target):
        raise TypeError(f"{entrypoint!r} is not callable")
    return target  # type: ignore[no-any-return]
