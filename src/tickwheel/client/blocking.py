"""The blocking facades (``Client``, ``Client.cron``, ``Client.workflows``, ``Client.webhooks``)
are made from their async twins, not written out again: ``get = blocking(CronClient.get)`` is a
method with ``get``'s very signature (for type checkers, ``help()`` and IDEs) that runs the
facade's inner client's ``get`` on the sync client's event loop thread. A keyword added to an
async method is then on its blocking twin too, with nothing to keep in step by hand."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
A = TypeVar("A")


class Run(Protocol):
    """Runs a coroutine to its end on the client's loop (``Client._run``)."""

    def __call__(self, coro: Coroutine[Any, Any, T]) -> T: ...


class Facade:
    """A blocking facade over ``inner``, an async client whose coroutines ``run`` completes."""

    def __init__(self, run: Run, inner: Any) -> None:
        self._run = run
        self._inner = inner


def blocking(
    method: Callable[Concatenate[A, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[Facade, P], R]:
    """The blocking twin of the async ``method``: the facade's inner client's method of the same
    name (so a subclass's override is the one that runs), run on the facade's loop."""
    name = method.__name__

    @functools.wraps(method)
    def run(self: Facade, /, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = self._run(getattr(self._inner, name)(*args, **kwargs))
        return result

    return run
