"""Named queries loaded from ``.sql`` files, so SQL is reviewed as SQL.

A file holds blocks that start with ``-- name: <query_name>``; the text up to the next such line
is the query. Both dialects define the same names (a test checks it)."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, str]:
    queries: dict[str, str] = {}
    parts = _NAME.split(text)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        queries[name] = body.strip().rstrip(";")
    return queries


@cache
def load_queries(package: str) -> dict[str, str]:
    """All queries of every ``.sql`` file in ``package`` (e.g. ``tickwheel.store.sqlite.sql``)."""
    queries: dict[str, str] = {}
    for entry in sorted(resources.files(package).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            for name, sql in parse_queries(entry.read_text("utf-8")).items():
                if name in queries:
                    raise ValueError(f"query {name!r} is defined in two files of {package}")
                queries[name] = sql
    return queries


def without_comment_lines(sql: str) -> str:
    """``sql`` without its whole-line comments (``--`` after any indentation): for a statement
    sent as it is (psycopg's query cache, store/postgres/claims.py) and for migrations split
    into statements (store/sqlite/migrating.py). A ``--`` after code on a line stays."""
    return "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))


def compact(sql: str) -> str:
    """``sql`` without its whole-line comments and each line's indentation: for a statement
    that must stay under psycopg's cache of converted queries (4,096 bytes,
    store/postgres/claims.py), where the indentation of the direct claim alone was some 500
    bytes. Only for statements with no string literal spanning lines (its lines would change)."""
    return "\n".join(line.lstrip() for line in without_comment_lines(sql).splitlines())
