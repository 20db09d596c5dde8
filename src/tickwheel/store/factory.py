"""Picks the backend from a database URL. Only composition roots call this."""

from __future__ import annotations

from tickwheel.store.cron_protocol import CronStore
from tickwheel.store.protocol import Store
from tickwheel.store.stats_protocol import StatsStore
from tickwheel.store.workflow_protocol import WorkflowStore
from tickwheel.store.workflow_view_protocol import WorkflowViewStore


async def open_store(url: str, *, pool_size: int = 10, connect_timeout: float = 10.0) -> Store:
    if url.startswith("sqlite:///") or url == "sqlite://:memory:":
        from tickwheel.store.sqlite.store import SqliteStore

        path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else ":memory:"
        return await SqliteStore.open(path or "tickwheel.db")
    if url.startswith(("postgresql://", "postgres://")):
        from psycopg_pool import PoolTimeout

        from tickwheel.store.postgres.store import PostgresStore

        try:
            return await PostgresStore.open(url, max_size=pool_size, timeout=connect_timeout)
        except PoolTimeout as exc:
            raise ConnectionError(
                f"cannot connect to PostgreSQL at {redact(url)} within {connect_timeout:g} s: "
                "is it running, and are the host, port, user and database right?"
            ) from exc
    raise ValueError(
        f"unsupported database URL {redact(url)!r}: use sqlite:///path/to/file.db or postgresql://..."
    )


def redact(url: str) -> str:
    """The URL without its password, for logs and error messages."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else url


def cron_store_for(store: Store) -> CronStore:
    """The Cron Service's tables on the same database as ``store``, sharing its connection (SQLite)
    or its pool (PostgreSQL)."""
    from tickwheel.store.postgres.cron import PostgresCronStore
    from tickwheel.store.postgres.store import PostgresStore
    from tickwheel.store.sqlite.store import SqliteStore

    if isinstance(store, SqliteStore):
        return store.cron
    if isinstance(store, PostgresStore):
        return PostgresCronStore(store.pool)
    raise TypeError(f"no cron store for {type(store).__name__}")


def stats_store_for(store: Store) -> StatsStore:
    """The dashboard's aggregates on the same database as ``store`` (its connection or pool)."""
    from tickwheel.store.postgres.stats import PostgresStatsStore
    from tickwheel.store.postgres.store import PostgresStore
    from tickwheel.store.sqlite.store import SqliteStore

    if isinstance(store, SqliteStore):
        return store.stats
    if isinstance(store, PostgresStore):
        return PostgresStatsStore(store.pool)
    raise TypeError(f"no stats store for {type(store).__name__}")


def workflow_store_for(store: Store) -> WorkflowStore:
    """The orchestrator's tables on the same database as ``store`` (its connection or pool)."""
    from tickwheel.store.postgres.store import PostgresStore
    from tickwheel.store.postgres.workflows import PostgresWorkflowStore
    from tickwheel.store.sqlite.store import SqliteStore

    if isinstance(store, SqliteStore):
        return store.workflows
    if isinstance(store, PostgresStore):
        return PostgresWorkflowStore(store.pool)
    raise TypeError(f"no workflow store for {type(store).__name__}")


def workflow_view_store_for(store: Store) -> WorkflowViewStore:
    """The dashboard's read-only workflow views on the same database as ``store``."""
    from tickwheel.store.postgres.store import PostgresStore
    from tickwheel.store.postgres.workflow_views import PostgresWorkflowViewStore
    from tickwheel.store.sqlite.store import SqliteStore

    if isinstance(store, SqliteStore):
        return store.workflow_views
    if isinstance(store, PostgresStore):
        return PostgresWorkflowViewStore(store.pool)
    raise TypeError(f"no workflow view store for {type(store).__name__}")
