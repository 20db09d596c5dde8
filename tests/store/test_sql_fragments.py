"""Fragments of a .sql file (store/sqlfile.py): text several queries share, written once and
expanded at load into each query that includes it, so that a query is still the statement it
was with the text written out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tickwheel.store.sqlfile import compact, load_queries, parse_queries

PACKAGES = ["tickwheel.store.sqlite.sql", "tickwheel.store.postgres.sql"]


def test_an_include_line_becomes_the_fragment_at_its_indentation() -> None:
    text = """
-- fragment: filters

    -- Written where it reads best: its shared indentation goes.
    AND b = :b

    AND c = :c


-- name: first
SELECT *
FROM t
WHERE a = 1
  -- include: filters
ORDER BY a;

-- name: second
SELECT count(*) FROM (
    SELECT * FROM t
    WHERE a = 2
            -- include: filters
);
"""
    assert parse_queries(text) == {
        "first": "SELECT *\nFROM t\nWHERE a = 1\n"
        "  -- Written where it reads best: its shared indentation goes.\n"
        "  AND b = :b\n\n  AND c = :c\nORDER BY a",
        "second": "SELECT count(*) FROM (\n    SELECT * FROM t\n    WHERE a = 2\n"
        "            -- Written where it reads best: its shared indentation goes.\n"
        "            AND b = :b\n\n            AND c = :c\n)",
    }


def test_a_query_with_its_fragments_is_the_query_written_out() -> None:
    written_out = """
-- name: q
WITH a AS (
    SELECT 1
),
b AS (
    SELECT 2
)
SELECT * FROM a, b;
"""
    with_fragments = """
-- fragment: ctes
WITH a AS (
    SELECT 1
),
-- include: b_cte
-- fragment: b_cte
b AS (
    SELECT 2
)
-- fragment: tail
SELECT * FROM a, b;
-- name: q
-- include: ctes
-- include: tail
"""
    assert parse_queries(with_fragments) == parse_queries(written_out)


def test_fragments_nest_and_each_level_adds_its_indentation() -> None:
    text = """
-- fragment: outer
AND (x
     -- include: inner
    )
-- fragment: inner
OR y
OR z
-- name: q
SELECT 1
WHERE true
  -- include: outer
"""
    assert parse_queries(text) == {
        "q": "SELECT 1\nWHERE true\n  AND (x\n       OR y\n       OR z\n      )"
    }


def test_a_fragment_is_no_query_and_an_include_in_a_line_of_code_is_a_comment() -> None:
    text = "-- fragment: f\nSELECT 1\n-- name: q\n-- include: f\n"
    text += "-- name: r\nSELECT 2 -- include: f\n"
    assert parse_queries(text) == {"q": "SELECT 1", "r": "SELECT 2 -- include: f"}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("-- name: q\nSELECT 1\n  -- include: nowhere\n", "query 'q' includes 'nowhere'"),
        (
            "-- fragment: f\nAND 1\n-- fragment: f\nAND 2\n-- name: q\n-- include: f\n",
            "fragment 'f' is defined twice",
        ),
        (
            "-- fragment: f\nSELECT 1\n-- include: f\n-- name: q\n-- include: f\n",
            r"fragment 'f' includes itself: f -> f",
        ),
        (
            "-- fragment: a\n-- include: b\n-- fragment: b\n-- include: a\n"
            "-- name: q\n-- include: a\n",
            r"fragment '[ab]' includes itself: (a -> b -> a|b -> a -> b)",
        ),
        ("-- fragment: f\nSELECT 1\n-- name: q\nSELECT 2\n", "fragment 'f' is never included"),
        (
            "-- fragment: f\nSELECT 1\n-- fragment: g\n-- include: f\n-- name: q\nSELECT 2\n",
            "fragment '[fg]' is never included",
        ),
        ("-- fragment: q\nSELECT 1\n-- name: q\n-- include: q\n", "'q' names both"),
        ("-- fragment: f\n\n-- name: q\n-- include: f\n", "fragment 'f' is empty"),
    ],
    ids=["unknown", "twice", "itself", "cycle", "unused", "used-by-unused", "both", "empty"],
)
def test_a_wrong_fragment_fails_the_load(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_queries(text)


def test_a_fragment_belongs_to_its_file_and_the_error_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "fragments_of_one_file"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.sql").write_text("-- fragment: f\nSELECT 1\n-- name: q\n-- include: f\n")
    (package / "b.sql").write_text("-- name: r\n-- include: f\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"b\.sql: query 'r' includes 'f', which is no fragment"):
        load_queries("fragments_of_one_file")


@pytest.mark.parametrize("package", PACKAGES)
def test_no_query_as_loaded_holds_a_marker_line(package: str) -> None:
    marker = re.compile(r"^\s*--\s*(name|fragment|include):", re.MULTILINE)
    assert [name for name, sql in load_queries(package).items() if marker.search(sql)] == []


@pytest.mark.parametrize("package", PACKAGES)
def test_a_claim_keeps_its_own_statement(package: str) -> None:
    """The claims share fragments and stay distinct statements (each planned on its own)."""
    queries = load_queries(package)
    claims = {compact(sql) for name, sql in queries.items() if name.startswith("execution_claim")}
    assert len(claims) == len([name for name in queries if name.startswith("execution_claim")])
