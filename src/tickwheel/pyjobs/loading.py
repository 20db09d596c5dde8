"""``tickwheel worker --app module:attr``: import an App and register its jobs at start.

The worker's run policy decides, as for any python entrypoint (docs/worker_policy.md): the
App's module is looked up BEFORE it is imported (importing runs it), and each job's entrypoint
(``module:function.run``) is judged as the python runner will judge it. A job the policy would
refuse stops the start with the reason, instead of dead-lettering every execution later. The
definitions go to the shared registry, as ``--definitions`` files do (starting workers is the
operator's act); a changed definition under a registered version stops the start (Conflict)."""

from __future__ import annotations

import importlib
import logging

from tickwheel.app.definitions import DefinitionService
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.engine.runners.python_policy import entrypoint_problem
from tickwheel.pyjobs.jobs import App
from tickwheel.store.protocol import Store

log = logging.getLogger(__name__)


class AppLoadError(Exception):
    """The App cannot be loaded or its jobs cannot run on this worker."""


def load_app(spec: str, policy: RunPolicy) -> App:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise AppLoadError(f"--app {spec!r} must look like 'package.module:app'")
    if problem := entrypoint_problem(spec, policy):
        raise AppLoadError(f"--app {spec!r} is refused: {problem}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise AppLoadError(f"--app {spec!r}: cannot import {module_name!r}: {exc}") from exc
    app = getattr(module, attr, None)
    if not isinstance(app, App):
        raise AppLoadError(f"--app {spec!r} is not a tickwheel.App (got {type(app).__name__})")
    for job in app.jobs.values():
        if problem := entrypoint_problem(job.entrypoint, policy):
            raise AppLoadError(f"job {job.name!r} ({job.entrypoint}) would be refused: {problem}")
    return app


async def register_apps(
    store: Store, specs: list[str], tenant: str, policy: RunPolicy
) -> list[str]:
    """Loads each App and registers its jobs; their definition URIs."""
    definitions = DefinitionService(store, tenant, run_policy=policy)
    uris: list[str] = []
    for spec in specs:
        for job in load_app(spec, policy).jobs.values():
            written = await definitions.apply(job.definition, shared=True)
            d = written.value.definition
            log.info("job %s v%d%s", d.name, d.version, "" if written.created else " (unchanged)")
            uris.append(d.uri)
    return uris
