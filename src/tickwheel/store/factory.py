"""Picks the backend from a database URL. Only composition roots call this."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

_Tables = TypeVar("_Tables")

if TYPE_CHECKING:
    # The protocols name return types only: importing them here would load the domain of every
    # group of tables (cron, workflows and their definition parsers, webhooks) into a worker,
    # whose store is all it opens.
    from psycopg_pool import AsyncConnectionPool

    from tickwheel.store.cron_protocol import CronStore
    from tickwheel.store.postgres.pool import Conn
    from tickwheel.store.protocol import Store
    from tickwheel.store.session_protocol import SessionStore
    from tickwheel.store.sqlite.store import SqliteStore
    from tickwheel.store.stats_protocol import StatsStore
    from tickwheel.store.webhook_protocol import WebhookStore
    from tickwheel.store.workflow_protocol import WorkflowStore
    from tickwheel.store.workflow_view_protocol import WorkflowViewStore

    # How to build a group of tables on a PostgreSQL pool. Each caller names its protocol here,
    # so that ``_tables_for`` returns that protocol and not the join of the two backend classes
    # (``object``: mypy does not join two classes into the protocol they both satisfy).
    OnPostgres = Callable[[AsyncConnectionPool[Conn]], _Tables]


async def open_store(
    url: str,
    *,
    pool_size: int = 10,
    connect_timeout: float = 10.0,
    claims: bool = False,
    promotes: bool = False,
) -> Store:
    """The store of ``url``. ``claims``: the process runs a worker, whose claims have their own
    connections on PostgreSQL (``PostgresStore.open``); ``promotes``: it runs a scheduler, whose
    promotions have theirs."""
    if url.startswith("sqlite:///") or url == "sqlite://:memory:":
        from tickwheel.store.sqlite.store import SqliteStore

        path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else ":memory:"
        return await SqliteStore.open(path or "tickwheel.db")
    if url.startswith(("postgresql://", "postgres://")):
        from psycopg_pool import PoolTimeout

        from tickwheel.store.postgres.store import PostgresStore

        try:
            return await PostgresStore.open(
                url,
                max_size=pool_size,
                timeout=connect_timeout,
                claims=claims,
                promotes=promotes,
            )
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


def _tables_for(
    store: Store,
    what: str,
    on_sqlite: Callable[[SqliteStore], _Tables],
    on_postgres: OnPostgres[_Tables],
) -> _Tables:
    """Another group of tables on the same database as ``store``: on SQLite sharing its one
    connection and lock, on PostgreSQL its pool. The backends are imported here, as in
    ``open_store``, so that importing this module loads neither of them; a store's own backend
    is loaded already, and the other is not loaded for it (SQLite's modules were ~40 ms of a
    PostgreSQL scheduler's start, for its pruner's and webhook sender's tables)."""
    if store.dialect == "postgresql":
        from tickwheel.store.postgres.store import PostgresStore

        if isinstance(store, PostgresStore):
            return on_postgres(store.pool)
    else:
        from tickwheel.store.sqlite.store import SqliteStore

        if isinstance(store, SqliteStore):
            return on_sqlite(store)
    raise TypeError(f"no {what} store for {type(store).__name__}")


def cron_store_for(store: Store) -> CronStore:
    """The Cron Service's tables on the same database as ``store``, sharing its connection (SQLite)
    or its pool (PostgreSQL)."""
    from tickwheel.store.postgres.cron import PostgresCronStore
    from tickwheel.store.postgres.store import PostgresStore

    def on_postgres(pool: AsyncConnectionPool[Conn]) -> CronStore:
        # The store's own LISTEN/NOTIFY: a job's change wakes the Cron Services (``Topic.CRON``).
        assert isinstance(store, PostgresStore)
        return PostgresCronStore(pool, store.signals)

    return _tables_for(store, "cron", lambda sqlite: sqlite.cron, on_postgres)


def stats_store_for(store: Store) -> StatsStore:
    """The dashboard's aggregates on the same database as ``store`` (its connection or pool)."""
    from tickwheel.store.postgres.stats import PostgresStatsStore

    on_postgres: OnPostgres[StatsStore] = PostgresStatsStore
    return _tables_for(store, "stats", lambda sqlite: sqlite.stats, on_postgres)


def workflow_store_for(store: Store) -> WorkflowStore:
    """The orchestrator's tables on the same database as ``store`` (its connection or pool)."""
    from tickwheel.store.postgres.workflows import PostgresWorkflowStore

    on_postgres: OnPostgres[WorkflowStore] = PostgresWorkflowStore
    return _tables_for(store, "workflow", lambda sqlite: sqlite.workflows, on_postgres)


def workflow_view_store_for(store: Store) -> WorkflowViewStore:
    """The dashboard's read-only workflow views on the same database as ``store``."""
    from tickwheel.store.postgres.workflow_views import PostgresWorkflowViewStore

    on_postgres: OnPostgres[WorkflowViewStore] = PostgresWorkflowViewStore
    return _tables_for(store, "workflow view", lambda sqlite: sqlite.workflow_views, on_postgres)


def session_store_for(store: Store) -> SessionStore:
    """The dashboard's sessions on the same database as ``store`` (its connection or pool)."""
    from tickwheel.store.postgres.sessions import PostgresSessionStore

    on_postgres: OnPostgres[SessionStore] = PostgresSessionStore
    return _tables_for(store, "session", lambda sqlite: sqlite.sessions, on_postgres)


@dataclass(frozen=True)
class ReadStores:
    """The dashboard's heavy reads on their own pool, to a standby (``read_database_url``):
    what they show lags the primary by the replication delay."""

    stats: StatsStore
    workflow_views: WorkflowViewStore
    close: Callable[[], Awaitable[None]]


async def open_read_stores(
    url: str, *, pool_size: int = 4, connect_timeout: float = 10.0
) -> ReadStores:
    """A pool on ``url`` (PostgreSQL; with several hosts, a standby preferred) for the
    dashboard's aggregates and workflow views."""
    if not url.startswith(("postgresql://", "postgres://")):
        raise ValueError(f"the read database must be PostgreSQL, not {redact(url)!r}")
    from psycopg_pool import PoolTimeout

    from tickwheel.store.postgres.pool import Pool
    from tickwheel.store.postgres.stats import PostgresStatsStore
    from tickwheel.store.postgres.workflow_views import PostgresWorkflowViewStore

    pool = Pool(url, min_size=1, max_size=pool_size, timeout=connect_timeout, reads=True)
    try:
        await pool.open(wait=True, timeout=connect_timeout)
    except PoolTimeout as exc:
        await pool.close()
        raise ConnectionError(
            f"cannot connect to the read database {redact(url)} within {connect_timeout:g} s"
        ) from exc
    return ReadStores(PostgresStatsStore(pool), PostgresWorkflowViewStore(pool), pool.close)


def webhook_store_for(store: Store) -> WebhookStore:
    """Webhook subscriptions and deliveries on the same database as ``store``."""
    from tickwheel.store.postgres.store import PostgresStore
    from tickwheel.store.postgres.webhooks import PostgresWebhookStore

    def on_postgres(pool: AsyncConnectionPool[Conn]) -> WebhookStore:
        # The store's own LISTEN/NOTIFY: a new delivery wakes the senders (``Topic.WEBHOOK``).
        assert isinstance(store, PostgresStore)
        return PostgresWebhookStore(pool, store.signals)

    return _tables_for(store, "webhook", lambda sqlite: sqlite.webhooks, on_postgres)
