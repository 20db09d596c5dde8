"""The executions table's columns are mapped from the records' fields (``store/execution_columns
.py``), not listed in ``rows.py``: these hold the two ``execution_insert`` statements to
``NewExecution``'s fields (PostgreSQL's items are positional, in that order) and every field of
the records to a kind, and check that a row reads back as the record it was written from."""

from __future__ import annotations

import re

import pytest

from tests.factories import new_execution
from tickwheel.store.execution_columns import (
    EXECUTION,
    NEW_EXECUTION,
    SPREAD,
    Kind,
    column,
    kind_of,
)
from tickwheel.store.migrate import load_migrations
from tickwheel.store.protocol import Store
from tickwheel.store.sqlfile import load_queries

# Columns the statement fills itself: the counters' start, and the instants derived from others.
FILLED_BY_THE_INSERT = {"attempt_count", "ready_at", "updated_at"}


def batch_insert_sql() -> str:
    """PostgreSQL's batch insert as the database runs it: ``execution_insert`` calls
    ``tickwheel_execution_insert`` (migration 0024), whose two tries and rows function hold the
    columns and the items' positions."""
    calls = load_queries("tickwheel.store.postgres.sql")["execution_insert"]
    assert "tickwheel_execution_insert(%(shared)s::jsonb, %(items)s::jsonb)" in calls
    (migration,) = [
        m
        for m in load_migrations("tickwheel.store.postgres.migrations")
        if "CREATE FUNCTION tickwheel_execution_insert(" in m.sql
    ]
    return migration.sql


def insert_columns(dialect: str, name: str = "execution_insert") -> list[str]:
    if (dialect, name) == ("postgres", "execution_insert"):
        sql = batch_insert_sql()
    else:
        sql = load_queries(f"tickwheel.store.{dialect}.sql")[name]
    lists = re.findall(r"INSERT INTO executions(?: AS e)? \(([^)]*)\)", sql)
    assert lists
    columns = [[c.strip() for c in listed.split(",")] for listed in lists]
    assert all(c == columns[0] for c in columns), "the batch's two tries insert the same columns"
    return columns[0]


@pytest.mark.parametrize("dialect", ["postgres", "sqlite"])
def test_the_insert_lists_the_new_executions_fields_in_their_order(dialect: str) -> None:
    columns = [c for c in insert_columns(dialect) if c not in FILLED_BY_THE_INSERT]
    spread = [c for columns in SPREAD.values() for c in columns]
    assert columns == [column(name) for name, _ in NEW_EXECUTION] + spread


def test_postgres_inserts_one_item_into_the_same_columns() -> None:
    """A single item's statement takes a parameter per column, named after its field (the
    spread ones after their column): each value goes into its field's column."""
    columns = insert_columns("postgres", "execution_insert_one")
    assert columns == insert_columns("postgres")
    sql = load_queries("tickwheel.store.postgres.sql")["execution_insert_one"]
    values = sql[sql.index("VALUES (") + len("VALUES (") : sql.index("ON CONFLICT")]
    entries = [e.strip() for e in values.rsplit(")", 1)[0].split(",")]
    assert len(entries) == len(columns)
    fields = {column(name): name for name, _ in NEW_EXECUTION}
    fields |= {c: c for spread in SPREAD.values() for c in spread}
    for col, entry in zip(columns, entries, strict=True):
        if col in FILLED_BY_THE_INSERT:
            continue
        assert re.fullmatch(rf"%\({fields[col]}\)s::\w+", entry), (col, entry)


def test_postgres_reads_each_item_at_the_fields_position() -> None:
    sql = batch_insert_sql()
    select = sql[sql.index("SELECT\n    position") : sql.index("FROM jsonb_array_elements")]
    positions = [int(p) for p in re.findall(r"item -{1,2}>{1,2} (\d+)", select)]
    spread = sum(len(columns) for columns in SPREAD.values())
    assert sorted(set(positions)) == list(range(len(NEW_EXECUTION) + spread))
    # The values the batch shares (rows.shared_columns) are read at the same positions, each
    # into the column of the row's value at that position.
    shared = dict(re.findall(r"s -{1,2}>{1,2} (\d+)(?:\)::\w+|, 'null'\))? AS (\w+)", sql))
    rows = dict(re.findall(r"item -{1,2}>{1,2} (\d+)(?:\)::\w+|, 'null'\))?\) AS (\w+)", sql))
    assert shared == rows
    assert sorted(int(p) for p in shared) == list(range(len(NEW_EXECUTION) + spread))


def test_every_field_has_a_kind() -> None:
    kinds = dict(EXECUTION)
    assert kinds["priority"] is Kind.PLAIN and kinds["execute_at"] is Kind.INSTANT
    assert kinds["next_attempt_at"] is Kind.OPTIONAL_INSTANT and kinds["inputs"] is Kind.OBJECT
    assert kinds["output"] is kinds["trace_context"] is Kind.JSON
    assert {name for name, _ in NEW_EXECUTION} <= set(kinds)
    with pytest.raises(TypeError, match="no column kind"):
        kind_of(set[int])


@pytest.mark.parametrize("execute_in", [None, 60.0], ids=["ready", "scheduled"])
async def test_a_row_reads_back_as_the_record_it_was_written_from(
    store: Store, execute_in: float | None
) -> None:
    """Through both backends' mappings: what the insert returns, what a read returns, and the
    item's every field on both."""
    item = new_execution(key="k-1", priority=7, execute_in=execute_in)
    [inserted] = await store.execution_insert_many([item])
    read = await store.execution_get(item.tenant, item.execution_id)
    assert inserted.created and inserted.execution == read
    for name, _ in NEW_EXECUTION:
        assert getattr(read, name) == getattr(item, name), name
    assert read.attempt_count == 0 and read.updated_at == item.created_at
    assert (read.ready_at is not None) == (execute_in is None)


def test_postgres_rows_function_returns_its_columns_under_their_names() -> None:
    """``tickwheel_execution_rows`` returns its SELECT's values positionally under the names of
    its ``RETURNS TABLE``, which the insert reads by name: the two lists must be one order."""
    sql = batch_insert_sql()
    declared = sql[sql.index("RETURNS TABLE (") : sql.index("LANGUAGE sql")]
    names = re.findall(r"(\w+) (?:bigint|uuid|text|integer|jsonb|timestamptz|smallint)", declared)
    select = sql[sql.index("SELECT\n    position") : sql.index("FROM jsonb_array_elements")]
    aliases = re.findall(r" AS (\w+),?\n", select)
    assert names == aliases
    assert names[0] == "item_position" and len(names) == 21
