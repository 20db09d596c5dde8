"""The shop's own tables and connections: the application's database, which is also
tickwheel's (the point of submitting in the same transaction)."""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg

ORDERS = "CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, total_cents INTEGER)"


def connect(url: str) -> Any:
    """A connection of the application's own: transactions are opened by its first statement
    and ended by ``commit()`` or ``rollback()``."""
    if url.startswith("sqlite:///"):
        return sqlite3.connect(url.removeprefix("sqlite:///"))
    return psycopg.connect(url)


def create_tables(url: str) -> None:
    conn = connect(url)
    try:
        conn.execute(ORDERS)
        conn.commit()
    finally:
        conn.close()


def insert_order(conn: Any, order_id: str, total_cents: int) -> None:
    marker = "?" if isinstance(conn, sqlite3.Connection) else "%s"
    conn.execute(
        f"INSERT INTO orders (order_id, total_cents) VALUES ({marker}, {marker})",  # noqa: S608
        (order_id, total_cents),
    )
