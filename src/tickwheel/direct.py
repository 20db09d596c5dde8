"""``tickwheel.connect``: the SDK straight on the database, without an API server.

An application that shares the scheduler's database submits through the same application layer
as the API (``InProcessTransport``): the same checks, limits (the server's ``TICKWHEEL_*``
settings), definition pinning and idempotency keys, for one tenant. A composition root, like the
CLI and the server: it picks the concrete store (contract 6 in pyproject.toml) and closes the
store it opened when the client closes. Cron jobs and workflows are still served by the API
only (the ``cron`` and ``workflows`` parts of these clients refuse with a clear error)."""

from __future__ import annotations

from tickwheel.client.client import AsyncClient
from tickwheel.client.sync import Client
from tickwheel.client.transports.inprocess import InProcessTransport
from tickwheel.config import Settings
from tickwheel.domain.clock import Clock
from tickwheel.store.factory import open_store, redact
from tickwheel.store.protocol import Store

__all__ = ["connect", "connect_async"]


class _OwnedStoreTransport(InProcessTransport):
    """The in-process transport that closes its store: here the client opened it."""

    async def close(self) -> None:
        await self.store.close()


async def connect_async(
    url: str,
    *,
    tenant: str = "default",
    clock: Clock | None = None,
    pool_size: int = 4,
    settings: Settings | None = None,
) -> AsyncClient:
    """An ``AsyncClient`` on the database at ``url`` (``postgresql://...`` or
    ``sqlite:///path``), acting for ``tenant``. A SQLite file is migrated on open, as the
    server does; a PostgreSQL database with pending migrations is refused (``tickwheel db
    upgrade``). ``settings``: the limits and run policy (default: the environment's)."""
    settings = settings or Settings(database_url=url)
    store = await open_store(url, pool_size=pool_size)
    try:
        await _check_schema(store, url)
    except BaseException:
        await store.close()
        raise
    transport = _OwnedStoreTransport(
        store, tenant, clock, settings.submit_limits(), settings.run_policy()
    )
    return AsyncClient(transport=transport, clock=clock)


def connect(
    url: str,
    *,
    tenant: str = "default",
    clock: Clock | None = None,
    pool_size: int = 4,
    settings: Settings | None = None,
) -> Client:
    """The blocking ``Client`` of ``connect_async``: its store lives on the client's own event
    loop thread, so it works in scripts, WSGI apps and inside running loops alike."""

    async def make() -> AsyncClient:
        return await connect_async(
            url, tenant=tenant, clock=clock, pool_size=pool_size, settings=settings
        )

    return Client(make_async=make)


async def _check_schema(store: Store, url: str) -> None:
    if store.dialect == "sqlite":
        await store.migrate()
    elif pending := await store.migrations_pending():
        raise RuntimeError(
            f"the database {redact(url)} needs migrations {', '.join(pending)}: "
            "run 'tickwheel db upgrade' first"
        )
