"""Named queries loaded from ``.sql`` files, so SQL is reviewed as SQL.

A file holds blocks that start with ``-- name: <query_name>``; the text up to the next such line
is the query. Both dialects define the same names (a test checks it).

Fragments: text that several queries of one file share is written once, in a block that starts
with ``-- fragment: <fragment_name>`` (at the start of a line, like a name line) and runs to the
next name or fragment line. A query, or another fragment, takes it in by a line that holds only
``-- include: <fragment_name>`` after any indentation. A fragment is text, not a query: it is
neither returned nor prepared, and each query that includes it is still a statement of its own.

- Expansion happens when the file is parsed: the include line is replaced by the fragment's
  lines, less the indentation they share in the fragment block and plus the include line's own
  indentation (a fragment is written where it reads best and fits any depth). Its blank lines
  at either end are dropped; its other blank lines stay empty. Nothing else changes: what a
  query that includes a fragment yields is the text it had with the lines written out.
- An include line is a whole-line comment, so it cannot be taken for SQL, and none is left after
  expansion. Markers are found by line, not by SQL syntax: no string literal spanning lines may
  hold a line that looks like one.
- A fragment belongs to its file (a query of another file cannot include it), may include
  other fragments, and must be included: an unknown name, a name defined twice (or as both a
  query and a fragment), an empty fragment, a fragment that includes itself through any chain,
  and a fragment that no query takes in are all errors at load."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable
from functools import cache
from importlib import resources

_IDENT = r"([a-z_][a-z0-9_]*)"
_BLOCK = re.compile(rf"^--[ \t]*(name|fragment):[ \t]*{_IDENT}[ \t]*$", re.MULTILINE)
_INCLUDE = re.compile(rf"^([ \t]*)--[ \t]*include:[ \t]*{_IDENT}[ \t]*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, str]:
    """The queries of one file's ``text``, their fragments included (module docstring)."""
    queries: dict[str, str] = {}
    fragments: dict[str, str] = {}
    parts = _BLOCK.split(text)
    for kind, name, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        if kind == "name":
            if name in queries:
                raise ValueError(f"query {name!r} is defined twice")
            queries[name] = body
        else:
            if name in fragments:
                raise ValueError(f"fragment {name!r} is defined twice")
            fragments[name] = _fragment_text(name, body)
    both = sorted(queries.keys() & fragments.keys())
    if both:
        raise ValueError(f"{both[0]!r} names both a query and a fragment")
    expander = _Expander(fragments)
    for name in fragments:
        expander.fragment(name, ())
    expanded = {
        name: expander.expand(body, f"query {name!r}", ()).strip().rstrip(";")
        for name, body in queries.items()
    }
    unused = sorted(fragments.keys() - expander.reached(queries.values()))
    if unused:
        raise ValueError(f"fragment {unused[0]!r} is never included by a query")
    return expanded


def _fragment_text(name: str, body: str) -> str:
    lines = body.split("\n")
    while lines and not lines[0].strip():
        del lines[0]
    while lines and not lines[-1].strip():
        del lines[-1]
    if not lines:
        raise ValueError(f"fragment {name!r} is empty")
    return textwrap.dedent("\n".join(lines))


class _Expander:
    """A file's fragments, each expanded once (so that every one is checked, used or not), and
    the fragments that its queries reach."""

    def __init__(self, fragments: dict[str, str]) -> None:
        self._fragments = fragments
        self._expanded: dict[str, str] = {}

    def fragment(self, name: str, chain: tuple[str, ...]) -> str:
        if name in chain:
            raise ValueError(f"fragment {name!r} includes itself: {' -> '.join((*chain, name))}")
        if name not in self._expanded:
            text = self._fragments[name]
            self._expanded[name] = self.expand(text, f"fragment {name!r}", (*chain, name))
        return self._expanded[name]

    def expand(self, text: str, where: str, chain: tuple[str, ...]) -> str:
        def include(match: re.Match[str]) -> str:
            indent, name = match.group(1), match.group(2)
            if name not in self._fragments:
                raise ValueError(f"{where} includes {name!r}, which is no fragment of its file")
            lines = self.fragment(name, chain).split("\n")
            return "\n".join(indent + line if line else line for line in lines)

        return _INCLUDE.sub(include, text)

    def reached(self, texts: Iterable[str]) -> set[str]:
        """The fragments that ``texts`` (unexpanded) include, directly or through others."""
        seen: set[str] = set()
        todo = [m.group(2) for text in texts for m in _INCLUDE.finditer(text)]
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += [m.group(2) for m in _INCLUDE.finditer(self._fragments[name])]
        return seen


@cache
def load_queries(package: str) -> dict[str, str]:
    """All queries of every ``.sql`` file in ``package`` (e.g. ``tickwheel.store.sqlite.sql``)."""
    queries: dict[str, str] = {}
    for entry in sorted(resources.files(package).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            try:
                parsed = parse_queries(entry.read_text("utf-8"))
            except ValueError as exc:
                raise ValueError(f"{package} {entry.name}: {exc}") from exc
            for name, sql in parsed.items():
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
