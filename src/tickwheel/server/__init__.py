"""Composition root of ``tickwheel server`` and of the role processes: opens the store, prepares
it, and serves the API or runs the engine's services alone.

On first start the server creates an operator key, prints it once and writes it to a file only
the user can read, so that the README's tour works without any set-up. The parts: ``startup``
(what every start does), ``roles`` (``tickwheel worker``/``scheduler``/``orchestrator``),
``serving`` (the API under uvicorn, ``tickwheel cron run``) and ``in_process`` (the engine's
services as tasks of one process).

The names below are loaded on first use (PEP 562), so that a worker, which needs ``run_roles``
only, does not import FastAPI and uvicorn with ``serve``. The CLI looks them up here when a
command runs, which is also where a test replaces them. No part may be named like a name here:
importing it would set the package's attribute to the module."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tickwheel.server.in_process import Engine
    from tickwheel.server.roles import run_roles
    from tickwheel.server.serving import Announce, run_cron, run_on_fast_loop, serve
    from tickwheel.server.startup import (
        DEFINITION_SUFFIXES,
        FirstKey,
        Prepared,
        StartupError,
        ensure_admin_key,
        exit_past_stuck_jobs,
        is_loopback,
        load_definitions,
        prepare,
    )

_NAMES = {
    "Engine": "tickwheel.server.in_process",
    "DEFINITION_SUFFIXES": "tickwheel.server.startup",
    "FirstKey": "tickwheel.server.startup",
    "Prepared": "tickwheel.server.startup",
    "StartupError": "tickwheel.server.startup",
    "ensure_admin_key": "tickwheel.server.startup",
    "exit_past_stuck_jobs": "tickwheel.server.startup",
    "is_loopback": "tickwheel.server.startup",
    "load_definitions": "tickwheel.server.startup",
    "prepare": "tickwheel.server.startup",
    "run_roles": "tickwheel.server.roles",
    "Announce": "tickwheel.server.serving",
    "run_cron": "tickwheel.server.serving",
    "run_on_fast_loop": "tickwheel.server.serving",
    "serve": "tickwheel.server.serving",
}

__all__ = [
    "DEFINITION_SUFFIXES",
    "Announce",
    "Engine",
    "FirstKey",
    "Prepared",
    "StartupError",
    "ensure_admin_key",
    "exit_past_stuck_jobs",
    "is_loopback",
    "load_definitions",
    "prepare",
    "run_cron",
    "run_on_fast_loop",
    "run_roles",
    "serve",
]


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'tickwheel.server' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMES})
