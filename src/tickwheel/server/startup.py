"""What every process of ``tickwheel`` does before its services start: check the settings, open
the store, check its schema, create the first key (a server), publish the definitions it was
given. Imported by the role processes too, so it leaves the web stack (and the parts that only
some starts need) unimported until they are needed."""

from __future__ import annotations

import ipaddress
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from tickwheel.config import Settings
from tickwheel.domain.clock import SystemClock
from tickwheel.domain.models import Scope
from tickwheel.domain.run_policy import RunPolicy
from tickwheel.engine.runners.secrets import SecretsFileError
from tickwheel.server.in_process import worker_secrets
from tickwheel.store.factory import open_store, redact
from tickwheel.store.protocol import Store

log = logging.getLogger("tickwheel.server")
DEFINITION_SUFFIXES = (".yaml", ".yml", ".json", ".xml")


class StartupError(RuntimeError):
    """A reason not to start, worded for the person who started it."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class FirstKey:
    secret: str
    path: Path


async def ensure_admin_key(store: Store, settings: Settings) -> FirstKey | None:
    """Creates the first key when no key exists yet: an operator key of the default tenant,
    because whoever starts the server runs the cluster (and publishes shared definitions)."""
    if await store.api_key_count() > 0:
        return None
    from tickwheel.api.auth import create_key  # a server's start only

    _, secret = await create_key(
        store, settings.tenant, Scope.OPERATOR, "first operator key", SystemClock().now()
    )
    path = Path(settings.admin_key_file)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Created 0600 from the start, so the secret is never readable by others, even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
    os.chmod(path, 0o600)
    return FirstKey(secret, path)


async def load_definitions(
    store: Store, directory: Path, tenant: str, policy: RunPolicy | None = None
) -> list[str]:
    """Publishes every definition file of ``directory`` to the shared registry (the operator's
    act: whoever starts the server runs the cluster) and returns their URIs; a conflict stops
    the start, because serving with a definition other than the one on disk would surprise
    everyone. ``policy`` judges them as registration does (docs/worker_policy.md)."""
    from tickwheel.app.definitions import DefinitionService
    from tickwheel.domain.definition_files import format_from_filename, parse_definition

    if not directory.is_dir():
        raise StartupError(f"--definitions {directory}: not a directory")
    definitions = DefinitionService(store, tenant)
    loaded: list[str] = []
    for path in sorted(directory.iterdir()):
        if path.suffix.lower() not in DEFINITION_SUFFIXES:
            continue
        try:
            fmt = format_from_filename(path.name)
            definition = parse_definition(path.read_bytes(), fmt, policy=policy)
            written = await definitions.apply(definition, shared=True)
        except Exception as exc:
            raise StartupError(f"definition file {path}: {exc}") from exc
        d = written.value.definition
        log.info(
            "definition %s v%d%s", d.name, d.version, "" if written.created else " (unchanged)"
        )
        loaded.append(d.uri)
    return loaded


@dataclass(frozen=True)
class Prepared:
    store: Store
    first_key: FirstKey | None
    definition_uris: list[str] | None
    """The URIs of the ``--definitions`` folder, when one was given."""


async def prepare(
    settings: Settings, *, serves_api: bool = True, claims: bool = False, promotes: bool = False
) -> Prepared:
    """Opens and checks the store; ``claims``: the process runs a worker, ``promotes``: a
    scheduler (``open_store``)."""
    if settings.insecure_no_auth and not is_loopback(settings.host):
        raise StartupError(
            f"--insecure-no-auth is only allowed on a loopback address, not {settings.host}"
        )
    try:  # a worker with a bad secrets file would fail every attempt that needs a secret
        worker_secrets(settings).check()
    except SecretsFileError as exc:
        raise StartupError(str(exc)) from exc
    store = await open_store(
        settings.database_url,
        pool_size=settings.db_pool_size,
        claims=claims,
        promotes=promotes,
    )
    try:
        if store.dialect == "sqlite":
            applied = await store.migrate()
            if applied:
                log.info("applied migrations: %s", ", ".join(applied))
        elif pending := await store.migrations_pending():
            raise StartupError(
                f"the database {redact(settings.database_url)} needs migrations "
                f"{', '.join(pending)}: run 'tickwheel db upgrade' first"
            )
        needs_key = serves_api and not settings.insecure_no_auth
        first_key = await ensure_admin_key(store, settings) if needs_key else None
        uris = None
        if settings.definitions_dir:
            folder = Path(settings.definitions_dir)
            uris = await load_definitions(store, folder, settings.tenant, settings.run_policy())
        if specs := [spec.strip() for spec in settings.apps.split(",") if spec.strip()]:
            from tickwheel.pyjobs.loading import register_apps

            try:
                jobs = await register_apps(store, specs, settings.tenant, settings.run_policy())
            except Exception as exc:
                raise StartupError(str(exc)) from exc
            uris = [*(uris or []), *jobs]
    except BaseException:
        await store.close()
        raise
    return Prepared(store, first_key, uris)


def exit_past_stuck_jobs() -> None:
    """Called once everything is shut down. A sync job thread that ignored its timeout cannot be
    stopped, and the interpreter would wait for it at exit (forever, for a hung job); its
    execution has already been released or reaped, so leave without it."""
    stuck = [
        t for t in threading.enumerate() if t.name.startswith("tickwheel-job") and t.is_alive()
    ]
    for thread in stuck:
        thread.join(0.1)
    if any(t.is_alive() for t in stuck):
        log.warning("exiting with %d job thread(s) still running", len(stuck))
        logging.shutdown()
        os._exit(0)
