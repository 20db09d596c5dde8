"""SQL is reviewed as SQL: both dialects name the same queries, and the migration runner keeps
both dialects' migrations in step and refuses an edited, already-applied migration."""

from __future__ import annotations

import pytest

from tickwheel.store.migrate import Migration, MigrationError, load_migrations, pending
from tickwheel.store.sqlfile import compact, load_queries, parse_queries

SQLITE_SQL = "tickwheel.store.sqlite.sql"
POSTGRES_SQL = "tickwheel.store.postgres.sql"
SQLITE_MIGRATIONS = "tickwheel.store.sqlite.migrations"
POSTGRES_MIGRATIONS = "tickwheel.store.postgres.migrations"


# -- named queries --------------------------------------------------------------------------------


# Queries one dialect needs and the other does not, each with the reason. PostgreSQL claims in
# one statement whose data-modifying CTEs draw the fencing tokens from a sequence and insert the
# attempt rows; SQLite has neither data-modifying CTEs nor sequences, so its claim takes three
# statements in one write transaction (src/tickwheel/store/sqlite/sql/claims.sql).
# webhook_delivery_claimed: SQLite's RETURNING cannot join the subscription (PostgreSQL's claim
# does it in the same statement).
SQLITE_ONLY = {
    "fencing_token_next",
    "attempt_insert",
    "webhook_delivery_claimed",
    # PostgreSQL takes the slots of a claim inside its one claim statement.
    "concurrency_hold_insert",
    # SQLite chooses its fair claim per claim, in the claim's write transaction (sqlite/claims.py);
    # PostgreSQL's prepared claim reads the same two probes and its fair claim is the one that
    # applies limits.
    "execution_claim_tenants_spread",
    "execution_claim_ready_fair",
    # The plain claim's second source (due SCHEDULED rows of open shards) is a statement of its
    # own in the claim's write transaction; on PostgreSQL a CTE of
    # execution_claim_ready_unlimited.
    "execution_claim_direct",
    # The same, the herd walked in id order first (PostgreSQL: execution_claim_ready_ordered).
    "execution_claim_ordered",
}
# The expiry's row-by-row steps: PostgreSQL does each in one statement (data-modifying CTEs).
SQLITE_ONLY |= {"execution_expire_one", "attempt_abandon", "execution_event_expired"}
# A herd's grace check: PostgreSQL counts and closes in one statement (shard_lease_grace, a
# data-modifying CTE); SQLite closes the shards counted empty in a statement of its own.
SQLITE_ONLY |= {"shard_lease_close"}
# A leased promotion on PostgreSQL first bounds how long its transaction may sit idle, so that a
# frozen scheduler cannot hold its fence's FOR SHARE locks on the shard rows forever. SQLite's
# fence locks no rows (one writer at a time) and SQLite has no such setting.
# The claim before concurrency limits, prepared, for when none is in sight (postgres/claims.py):
# a generic plan of the claim that applies limits can sort every READY row.
# Its firing by id, leased, is one statement there (fence, promotion and NOTIFY together), where
# SQLite runs the fence and execution_promote_ids in one transaction.
POSTGRES_ONLY = {
    "promotion_idle_timeout",
    "execution_claim_ready_unlimited",
    # The same with the due SCHEDULED rows of open shards as a second source (SQLite:
    # execution_claim_direct), a statement of its own so that a drain does not plan it.
    "execution_claim_ready_direct",
    # The same with the herd walked in id order first (SQLite: execution_claim_ordered).
    "execution_claim_ready_ordered",
    "execution_promote_ids_fenced",
    # The cron claim there returns only the columns a tick moves on, and the whole rows of the
    # jobs its store has not seen at that version are read by id (store/postgres/cron.py).
    "cron_job_get_by_ids",
    # The insert of a single submission: the batch's statement without its shared columns.
    "execution_insert_one",
    # The listing without a definition filter, one ordered page per status, merged: there is no
    # (tenant, execution_id) index on PostgreSQL (migration 0021; SQLite keeps it).
    "execution_list_merged",
    "execution_list_status_page",
}


def test_both_dialects_define_exactly_the_same_query_names() -> None:
    sqlite = set(load_queries(SQLITE_SQL)) - SQLITE_ONLY
    postgres = set(load_queries(POSTGRES_SQL)) - POSTGRES_ONLY
    assert sqlite, "the SQLite dialect defines no query"
    assert sorted(sqlite - postgres) == [], "queries only SQLite defines"
    assert sorted(postgres - sqlite) == [], "queries only PostgreSQL defines"
    # An exemption that no longer holds is dropped, not left to hide a real difference.
    assert set(load_queries(SQLITE_SQL)) >= SQLITE_ONLY
    assert not SQLITE_ONLY & set(load_queries(POSTGRES_SQL))
    assert set(load_queries(POSTGRES_SQL)) >= POSTGRES_ONLY
    assert not POSTGRES_ONLY & set(load_queries(SQLITE_SQL))


@pytest.mark.parametrize("package", [SQLITE_SQL, POSTGRES_SQL])
def test_no_query_is_empty(package: str) -> None:
    empty = [name for name, sql in load_queries(package).items() if not sql.strip()]
    assert empty == []


def test_parse_queries_splits_on_name_lines() -> None:
    text = """
-- name: first_query
SELECT 1;

-- name: second_query
SELECT *
FROM t
WHERE x = :x;
"""
    assert parse_queries(text) == {
        "first_query": "SELECT 1",
        "second_query": "SELECT *\nFROM t\nWHERE x = :x",
    }


def test_parse_queries_ignores_text_before_the_first_name() -> None:
    assert parse_queries("-- a file comment\n-- name: q\nSELECT 1;\n") == {"q": "SELECT 1"}
    assert parse_queries("-- only a comment\n") == {}


def test_compact_drops_comment_lines_and_indentation_and_keeps_the_rest() -> None:
    sql = "WITH a AS (\n    -- why\n    SELECT 1 -- one\n      FROM t\n)\nSELECT * FROM a"
    assert compact(sql) == "WITH a AS (\nSELECT 1 -- one\nFROM t\n)\nSELECT * FROM a"


def test_parse_queries_rejects_a_duplicate_name() -> None:
    text = "-- name: same\nSELECT 1;\n-- name: other\nSELECT 2;\n-- name: same\nSELECT 3;\n"
    with pytest.raises(ValueError, match="'same' is defined twice"):
        parse_queries(text)


# -- migrations -----------------------------------------------------------------------------------


def test_both_dialects_have_the_same_migrations() -> None:
    sqlite = load_migrations(SQLITE_MIGRATIONS)
    postgres = load_migrations(POSTGRES_MIGRATIONS)
    assert sqlite, "no SQLite migration found"
    assert [(m.version, m.name) for m in sqlite] == [(m.version, m.name) for m in postgres]
    assert [m.version for m in sqlite] == list(range(1, len(sqlite) + 1))
    assert sqlite[0].label == "0001_initial"


@pytest.mark.parametrize("package", [SQLITE_MIGRATIONS, POSTGRES_MIGRATIONS])
def test_migrations_have_content_and_distinct_checksums(package: str) -> None:
    migrations = load_migrations(package)
    assert all(m.sql.strip() for m in migrations)
    assert len({m.checksum for m in migrations}) == len(migrations)


def _chain(*sqls: str) -> list[Migration]:
    return [Migration(i, f"step_{i}", sql) for i, sql in enumerate(sqls, start=1)]


def test_pending_lists_what_is_not_applied_in_order() -> None:
    chain = _chain("CREATE TABLE a (x int)", "CREATE TABLE b (y int)", "CREATE TABLE c (z int)")
    assert pending(chain, {}) == chain
    assert pending(chain, {1: chain[0].checksum}) == chain[1:]
    assert pending(chain, {m.version: m.checksum for m in chain}) == []


def test_pending_raises_when_an_applied_migration_was_edited() -> None:
    chain = _chain("CREATE TABLE a (x int)", "CREATE TABLE b (y int)")
    edited = {1: chain[0].checksum, 2: Migration(2, "step_2", "CREATE TABLE b (y bigint)").checksum}
    with pytest.raises(MigrationError, match="0002_step_2 changed after it was applied"):
        pending(chain, edited)


def test_pending_raises_for_the_real_migrations_when_a_checksum_differs() -> None:
    migrations = load_migrations(SQLITE_MIGRATIONS)
    with pytest.raises(MigrationError, match="0001_initial"):
        pending(migrations, {1: "0" * 64})


def test_a_checksum_is_the_sha256_of_the_text() -> None:
    a = Migration(1, "x", "SELECT 1")
    assert len(a.checksum) == 64
    assert a.checksum == Migration(7, "other", "SELECT 1").checksum
    assert a.checksum != Migration(1, "x", "SELECT 1 ").checksum
