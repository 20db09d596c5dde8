"""Picks the backend from a database URL. Only composition roots call this."""

from __future__ import annotations

from tickwheel.store.protocol import Store


async def open_store(url: str, *, pool_size: int = 10) -> Store:
    if url.startswith("sqlite:///") or url == "sqlite://:memory:":
        from tickwheel.store.sqlite.store import SqliteStore

        path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else ":memory:"
        return await SqliteStore.open(path or "tickwheel.db")
    if url.startswith(("postgresql://", "postgres://")):
        from tickwheel.store.postgres.store import PostgresStore

        return await PostgresStore.open(url, max_size=pool_size)
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
