"""Which python entrypoints a worker imports: the run policy's python rules, plus the look at
where a module lives that the default rule needs (I/O, so here and not in the domain).

``entrypoint_problem`` is asked BEFORE anything is imported, because importing a module runs
it; it looks up the top-level name only (``find_spec`` of a dotted name imports its parents).
``callable_problem`` is asked of what the entrypoint names once imported: an allowed module must
not be a way to someone else's function (``from os import system``).
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any

from tickwheel.domain.definitions import PythonExecution
from tickwheel.domain.run_policy import (
    RunPolicy,
    python_module_problem,
    run_problems,
    uses_default_python_rule,
)

__all__ = ["callable_problem", "entrypoint_problem", "origin_problem"]

_allowed: set[tuple[str, RunPolicy]] = set()  # allowed once, allowed for good: a module stays


def entrypoint_problem(entrypoint: str, policy: RunPolicy) -> str | None:
    """Why ``policy`` refuses ``entrypoint``, or None. Only allowed answers are remembered, so a
    module put in place later is seen."""
    if (entrypoint, policy) in _allowed:
        return None
    problems = run_problems(PythonExecution(entrypoint), policy)
    module = entrypoint.partition(":")[0]
    if not problems and uses_default_python_rule(module, policy):
        problems = [p for p in [origin_problem(module, policy)] if p]
    if problems:
        return "; ".join(problems)
    if len(_allowed) < 4096:
        _allowed.add((entrypoint, policy))
    return None


def _code_roots(policy: RunPolicy) -> list[Path]:
    return [Path(p).resolve() for p in policy.python_paths or (".",)]


def origin_problem(module: str, policy: RunPolicy) -> str | None:
    """Why the default rule refuses ``module``: its top-level package is not under the worker's
    code paths, or is an installed package (site-packages). Imports nothing."""
    top = module.partition(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError) as exc:
        return f"cannot look up module {top!r}: {type(exc).__name__}: {exc}"
    if spec is None:
        return f"no module named {top!r} on this worker (is its folder given with --path?)"
    places = [spec.origin] if spec.has_location and spec.origin else []
    places += list(spec.submodule_search_locations or [])
    if not places:
        return f"module {top!r} has no file of its own (built in or frozen)"
    roots = _code_roots(policy)
    for place in places:
        path = Path(place).resolve()
        if {"site-packages", "dist-packages"} & set(path.parts):
            return (
                f"module {top!r} is an installed package ({path.parent}): by default a worker runs"
                " only code under its own code paths; list the package in"
                " TICKWHEEL_PYTHON_MODULES to allow it"
            )
        if not any(path.is_relative_to(root) for root in roots):
            where = ", ".join(str(r) for r in roots)
            return (
                f"module {top!r} ({path}) is not under this worker's code paths ({where}):"
                " give its folder with --path, or list it in TICKWHEEL_PYTHON_MODULES"
            )
    return None


def callable_problem(entrypoint: str, target: Any, policy: RunPolicy) -> str | None:
    """Why the callable ``entrypoint`` names may not run: it is defined in a module the policy
    refuses (``from os import system`` in an allowed module makes ``allowed:system`` os's)."""
    func = target
    while isinstance(func, functools.partial):
        func = func.func
    home = getattr(func, "__module__", None)
    if not isinstance(home, str) or home == entrypoint.partition(":")[0]:
        return None
    problem = python_module_problem(home, policy)
    if problem is None and uses_default_python_rule(home, policy):
        problem = origin_problem(home, policy)
    return None if problem is None else f"it is defined in {home!r}, and {problem}"
