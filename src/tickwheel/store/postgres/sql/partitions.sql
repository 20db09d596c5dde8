-- Optional monthly partitioning of executions (docs/scaling.md, "Partitioning"), for
-- `tickwheel db partitions ...`. The partition key is execution_id itself: a UUIDv7 starts with
-- its creation time in milliseconds, and uuid compares bytewise, so the ids of one UTC month are
-- one contiguous range. Bounds are the lowest UUIDv7 of each month's first millisecond.
-- Queries with {placeholders} are templates: identifiers and bounds composed by the module with
-- psycopg.sql (Identifier, Literal), never by string formatting.

-- name: partition_layout
SELECT CASE c.relkind WHEN 'p' THEN 'partitioned' ELSE 'plain' END AS layout
FROM pg_class c
WHERE c.oid = 'executions'::regclass;

-- name: partition_list
-- Row counts are the planner's estimate (-1: never analysed): exact counts would read every
-- partition, and this is for people deciding what to drop.
SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound,
       c.reltuples::bigint AS rows_estimate, pg_total_relation_size(c.oid) AS bytes
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'executions'::regclass
ORDER BY c.relname;

-- name: partition_lock_timeout
-- For this transaction only: DDL on executions queues behind running queries and, while it
-- waits, every new query queues behind it. Better to give up and say so than stall the cluster.
SELECT set_config('lock_timeout', %(timeout)s, true);

-- name: partition_enable_blockers
-- What is still running against the database: workers heard from lately and schedulers holding
-- leases. The conversion is for a maintenance window; these would only queue behind its lock.
SELECT 'worker ' || worker_id AS who FROM workers
WHERE stopped_at IS NULL AND last_heartbeat_at > %(since)s
UNION ALL
SELECT DISTINCT 'scheduler ' || owner FROM shard_leases
WHERE owner IS NOT NULL AND expires_at > %(now)s
ORDER BY 1;

-- name: partition_enable_lock
-- Taken first, for the whole conversion: nothing reads or writes executions or the tables that
-- hang off it until the new layout is in place (or the conversion rolled back).
LOCK TABLE executions, attempts, execution_events, execution_outputs IN ACCESS EXCLUSIVE MODE;

-- name: partition_references
-- Foreign keys that point at executions: the conversion replaces exactly the known ones.
SELECT conrelid::regclass::text AS table_name, conname AS constraint_name
FROM pg_constraint
WHERE contype = 'f' AND confrelid = 'executions'::regclass
ORDER BY 1, 2;

-- name: partition_unique_indexes
-- Unique indexes other than the primary key cannot survive partitioning unless they include
-- execution_id; the idempotency key is the one the conversion knows how to carry over.
SELECT c.relname AS name
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'executions'::regclass AND i.indisunique AND NOT i.indisprimary
ORDER BY 1;

-- name: partition_index_definitions
-- The plain indexes (due, ready, running lease, retry, listing, finished, and any a later
-- migration adds), rebuilt on the partitioned table under the same names from their own DDL.
SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'executions'::regclass
  AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
ORDER BY 1;

-- name: partition_months_in_use
-- The UTC months of the UUIDv7 ids present (version nibble 7): the first 48 bits are Unix
-- milliseconds. Other ids (none are made by tickwheel) go to the default partition.
SELECT DISTINCT date_trunc(
    'month',
    to_timestamp(('x' || substr(replace(execution_id::text, '-', ''), 1, 12))::bit(48)::bigint
                 / 1000.0),
    'UTC') AS month
FROM executions
WHERE substr(execution_id::text, 15, 1) = '7'
ORDER BY 1;

-- name: partition_enable_prepare
-- The new parent under a temporary name, with the same columns, defaults and checks; the
-- primary key and indexes come after the copy (building them once is faster than maintaining
-- them row by row). execution_keys: the idempotency keys, unique here since they cannot be
-- unique on the partitioned table; its execution_id index serves deletes by id and by range.
CREATE TABLE executions_partitioned (
    LIKE executions INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE
) PARTITION BY RANGE (execution_id);
CREATE TABLE execution_keys (
    tenant           text NOT NULL,
    idempotency_key  text NOT NULL,
    execution_id     uuid NOT NULL,
    PRIMARY KEY (tenant, idempotency_key)
);
CREATE INDEX execution_keys_execution ON execution_keys (execution_id);

-- name: partition_create_default
-- Catches any id outside the monthly ranges, so an insert never fails for want of a partition
-- (a month `ensure` was not run for). It is never dropped; the pruner deletes its rows.
CREATE TABLE {partition} PARTITION OF {parent} DEFAULT;

-- name: partition_create_month
CREATE TABLE {partition} PARTITION OF {parent} FOR VALUES FROM ({lower}) TO ({upper});

-- name: partition_copy_rows
-- One statement each, inside the conversion's transaction: all or nothing.
INSERT INTO executions_partitioned SELECT * FROM executions;

-- name: partition_copy_keys
INSERT INTO execution_keys (tenant, idempotency_key, execution_id)
SELECT tenant, idempotency_key, execution_id FROM executions WHERE idempotency_key IS NOT NULL;

-- name: partition_drop_reference
ALTER TABLE {table} DROP CONSTRAINT {constraint};

-- name: partition_swap
-- The old table goes (nothing references it any more), its names are free, and the new one
-- takes them. executions_idempotency_key stays as a plain index for the lookup of an existing
-- execution by key (one probe per partition); the uniqueness lives in execution_keys.
DROP TABLE executions;
ALTER TABLE executions_partitioned RENAME TO executions;
ALTER TABLE executions ADD CONSTRAINT executions_pkey PRIMARY KEY (execution_id);
CREATE INDEX executions_idempotency_key ON executions (tenant, idempotency_key);

-- name: partition_finish
-- The functions come from migration 0010. The key trigger is added after the copy, whose keys
-- were carried over by partition_copy_keys.
CREATE TRIGGER executions_key_claim BEFORE INSERT ON executions
    FOR EACH ROW EXECUTE FUNCTION tickwheel_execution_key_claim();
CREATE TRIGGER executions_children_delete AFTER DELETE ON executions
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION tickwheel_execution_children_delete();
CREATE TRIGGER executions_children_truncate AFTER TRUNCATE ON executions
    FOR EACH STATEMENT EXECUTE FUNCTION tickwheel_execution_children_truncate();
-- Migration 0018's: a RUNNING execution that leaves RUNNING frees its concurrency slot.
CREATE TRIGGER executions_concurrency_release AFTER UPDATE OF status ON executions
    FOR EACH ROW
    WHEN (OLD.status = 'RUNNING' AND NEW.status <> 'RUNNING'
          AND OLD.concurrency_limit IS NOT NULL)
    EXECUTE FUNCTION tickwheel_concurrency_release();
ANALYZE executions, execution_keys;

-- name: partition_counts
-- Whether a partition may go: its rows that are not terminal, each status through its own
-- partial index, and its terminal rows finished since the cut-off, through executions_finished.
SELECT
    (SELECT count(*) FROM {partition} WHERE status = 'SCHEDULED')
    + (SELECT count(*) FROM {partition} WHERE status = 'READY')
    + (SELECT count(*) FROM {partition} WHERE status = 'RUNNING')
    + (SELECT count(*) FROM {partition} WHERE status = 'RETRY_WAIT') AS live,
    (SELECT count(*) FROM {partition}
     WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED')
       AND finished_at >= %(cutoff)s::timestamptz) AS recent;

-- name: partition_delete_children
-- One bounded batch of a child table's rows whose execution_id falls in a partition's range:
-- an index range scan, then a delete by tuple id, so no batch is a long transaction.
DELETE FROM {table}
WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM {table}
    WHERE execution_id >= %(lower)s::uuid AND execution_id < %(upper)s::uuid
    LIMIT %(limit)s
));

-- name: partition_lock_parent
-- ONLY: every query on executions goes through the parent, so locking it (not each partition)
-- fences the final re-check, detach and drop from any write, for a few milliseconds.
LOCK TABLE ONLY executions IN ACCESS EXCLUSIVE MODE;

-- name: partition_detach_and_drop
ALTER TABLE executions DETACH PARTITION {partition};
DROP TABLE {partition};
