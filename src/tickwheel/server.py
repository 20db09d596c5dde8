"""Composition root of ``tickwheel server``: opens the store, prepares it, and serves the API.

On first start it creates an admin key, prints it once and writes it to a file only the user
can read, so that the README's tour works without any set-up."""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from tickwheel.api.app import create_app
from tickwheel.api.auth import create_key
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.config import Settings
from tickwheel.domain.clock import SystemClock
from tickwheel.domain.definition_files import format_from_filename, parse_definition
from tickwheel.domain.models import Scope
from tickwheel.store.factory import open_store, redact
from tickwheel.store.protocol import Store

log = logging.getLogger("tickwheel.server")
DEFINITION_SUFFIXES = (".yaml", ".yml", ".json", ".xml")


Announce = Callable[[Settings, "FirstKey | None"], None]


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
    """Creates the first admin key when no key exists yet."""
    if await store.api_key_count() > 0:
        return None
    _, secret = await create_key(
        store, settings.tenant, Scope.ADMIN, "first admin key", SystemClock().now()
    )
    path = Path(settings.admin_key_file)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Created 0600 from the start, so the secret is never readable by others, even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
    os.chmod(path, 0o600)
    return FirstKey(secret, path)


async def load_definitions(store: Store, directory: Path, tenant: str) -> list[str]:
    """Registers every definition file of ``directory``; a conflict stops the start, because
    serving with a definition other than the one on disk would surprise everyone."""
    if not directory.is_dir():
        raise StartupError(f"--definitions {directory}: not a directory")
    transport = InProcessTransport(store, tenant)
    loaded: list[str] = []
    for path in sorted(directory.iterdir()):
        if path.suffix.lower() not in DEFINITION_SUFFIXES:
            continue
        try:
            definition = parse_definition(path.read_bytes(), format_from_filename(path.name))
            stored, created = await transport.apply_definition(definition)
        except Exception as exc:
            raise StartupError(f"definition file {path}: {exc}") from exc
        loaded.append(
            f"{stored.definition.name} v{stored.definition.version}"
            + ("" if created else " (unchanged)")
        )
    return loaded


async def prepare(settings: Settings) -> tuple[Store, FirstKey | None]:
    if settings.insecure_no_auth and not is_loopback(settings.host):
        raise StartupError(
            f"--insecure-no-auth is only allowed on a loopback address, not {settings.host}"
        )
    store = await open_store(settings.database_url, pool_size=settings.db_pool_size)
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
        first_key = None if settings.insecure_no_auth else await ensure_admin_key(store, settings)
        if settings.definitions_dir:
            for line in await load_definitions(
                store, Path(settings.definitions_dir), settings.tenant
            ):
                log.info("definition %s", line)
    except BaseException:
        await store.close()
        raise
    return store, first_key


async def serve(settings: Settings, announce: Announce | None = None) -> None:
    """Runs until interrupted; ``announce`` tells the person at the terminal what started."""
    store, first_key = await prepare(settings)
    try:
        if announce:
            announce(settings, first_key)
        app = create_app(store, settings)
        config = uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level.lower(),
            lifespan="off",
        )
        await uvicorn.Server(config).serve()
    finally:
        await store.close()
